//! Prometheus' remote-write request (protocol 1.0: a protobuf `WriteRequest`, snappy block
//! compressed), built from series the backtest writes into the server whose query engine
//! evaluates the rules: the replayed inputs, and each recording rule's results. Pure: bytes out;
//! the POST is the caller's (src/backtest/server.rs).

/// The special NaN Prometheus writes as a staleness marker: a series that ended.
pub(crate) const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The staleness marker's value.
pub(crate) fn stale_marker() -> f64 {
    f64::from_bits(STALE_NAN_BITS)
}

#[derive(Clone, PartialEq, prost::Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

/// One series to write: its labels (`__name__` among them) and its samples as (Unix
/// milliseconds, value), in time order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct WriteSeries {
    pub labels: Vec<(String, String)>,
    pub samples: Vec<(i64, f64)>,
}

/// Samples in one request at most: a request stays a few megabytes.
pub(crate) const MAX_SAMPLES_PER_REQUEST: usize = 100_000;

/// The request bodies that write `series`: each series' samples in time order, cut so that no
/// body holds more than [`MAX_SAMPLES_PER_REQUEST`] samples. A series cut across bodies keeps
/// its order when the bodies are sent in the order returned.
pub(crate) fn bodies(series: &[WriteSeries]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut req = WriteRequest::default();
    let mut in_req = 0usize;
    let flush = |req: &mut WriteRequest, in_req: &mut usize, out: &mut Vec<Vec<u8>>| {
        if !req.timeseries.is_empty() {
            let raw = prost::Message::encode_to_vec(&*req);
            // Compressing a Vec in memory can't fail short of a body over 4 GiB, which the
            // cut above rules out; an empty body would be refused by the server, not lost.
            out.push(
                snap::raw::Encoder::new()
                    .compress_vec(&raw)
                    .unwrap_or_default(),
            );
        }
        *req = WriteRequest::default();
        *in_req = 0;
    };
    for s in series {
        let mut labels: Vec<Label> = s
            .labels
            .iter()
            .map(|(n, v)| Label {
                name: n.clone(),
                value: v.clone(),
            })
            .collect();
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut rest = &s.samples[..];
        while !rest.is_empty() {
            let room = MAX_SAMPLES_PER_REQUEST - in_req;
            let (now, later) = rest.split_at(room.min(rest.len()));
            req.timeseries.push(TimeSeries {
                labels: labels.clone(),
                samples: now
                    .iter()
                    .map(|&(timestamp, value)| Sample { value, timestamp })
                    .collect(),
            });
            in_req += now.len();
            rest = later;
            if in_req >= MAX_SAMPLES_PER_REQUEST {
                flush(&mut req, &mut in_req, &mut out);
            }
        }
    }
    flush(&mut req, &mut in_req, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn decode(body: &[u8]) -> WriteRequest {
        let raw = snap::raw::Decoder::new().decompress_vec(body).unwrap();
        WriteRequest::decode(&raw[..]).unwrap()
    }

    #[test]
    fn a_series_round_trips_with_sorted_labels_and_a_staleness_marker() {
        let s = WriteSeries {
            labels: vec![
                ("mountpoint".into(), "/var/lib/postgresql".into()),
                ("__name__".into(), "ssdwatch_filesystem_avail_bytes".into()),
            ],
            samples: vec![(0, 1.5), (60_000, stale_marker()), (120_000, f64::NAN)],
        };
        let b = bodies(&[s]);
        assert_eq!(b.len(), 1);
        let r = decode(&b[0]);
        assert_eq!(r.timeseries.len(), 1);
        let ts = &r.timeseries[0];
        assert_eq!(ts.labels[0].name, "__name__");
        assert_eq!(ts.labels[1].value, "/var/lib/postgresql");
        assert_eq!(ts.samples[0].value, 1.5);
        assert_eq!(ts.samples[1].value.to_bits(), STALE_NAN_BITS);
        assert!(ts.samples[2].value.is_nan());
        assert_ne!(ts.samples[2].value.to_bits(), STALE_NAN_BITS);
        assert_eq!(ts.samples[2].timestamp, 120_000);
    }

    #[test]
    fn a_long_series_is_cut_across_bodies_in_order_and_none_is_lost() {
        let n = 2 * MAX_SAMPLES_PER_REQUEST + 7;
        let long = WriteSeries {
            labels: vec![("__name__".into(), "a".into())],
            samples: (0..n as i64).map(|i| (i * 1000, i as f64)).collect(),
        };
        let short = WriteSeries {
            labels: vec![("__name__".into(), "b".into())],
            samples: vec![(0, 1.0)],
        };
        let b = bodies(&[long, short]);
        assert_eq!(b.len(), 3);
        let mut seen: Vec<(String, i64)> = Vec::new();
        for body in &b {
            let r = decode(body);
            let count: usize = r.timeseries.iter().map(|t| t.samples.len()).sum();
            assert!(count <= MAX_SAMPLES_PER_REQUEST);
            for t in r.timeseries {
                for s in t.samples {
                    seen.push((t.labels[0].value.clone(), s.timestamp));
                }
            }
        }
        assert_eq!(seen.len(), n + 1);
        let a: Vec<i64> = seen.iter().filter(|(n, _)| n == "a").map(|x| x.1).collect();
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(bodies(&[]).is_empty());
    }
}
