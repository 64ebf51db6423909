//! The daemon's HTTP face, over real HTTP: landing page, health, readiness, and /metrics in the
//! text format 0.0.4 with every collector's own health series.

use ssdwatch::Roots;
use ssdwatch::config::Config;
use std::time::{Duration, Instant};

fn empty_host() -> (tempfile::TempDir, Roots) {
    // A host with no block devices and no mounts: the daemon must still serve.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("sys/block")).unwrap();
    std::fs::create_dir_all(dir.path().join("sys/class/block")).unwrap();
    std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
    std::fs::write(dir.path().join("proc/self/mountinfo"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("rootfs")).unwrap();
    let roots = Roots::fixture(dir.path());
    (dir, roots)
}

fn get(url: &str) -> (u16, String, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let mut resp = agent.get(url).call().expect("HTTP request");
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = resp.body_mut().read_to_string().expect("body");
    (status, ctype, body)
}

#[test]
fn daemon_serves_landing_health_ready_and_metrics() {
    let (dir, roots) = empty_host();
    let mut config = Config {
        state_dir: dir.path().join("state"),
        ..Config::default()
    };
    config.collectors.smart.enabled = false;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(ssdwatch::run_with_listener(
        config,
        roots,
        listener,
        async {
            let _ = rx.await;
        },
    ));
    let base = format!("http://{addr}");

    let (status, _, body) = get(&format!("{base}/"));
    assert_eq!(status, 200);
    assert!(body.contains("href=\"metrics\""), "{body}");
    assert!(body.contains(env!("CARGO_PKG_VERSION")));

    let (status, _, _) = get(&format!("{base}/-/healthy"));
    assert_eq!(status, 200);

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, _) = get(&format!("{base}/-/ready"));
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
        assert!(Instant::now() < deadline, "never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }

    let (status, ctype, body) = get(&format!("{base}/metrics"));
    assert_eq!(status, 200);
    assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8");
    for c in ["topology", "diskstats", "filesystem", "probe"] {
        assert!(
            body.contains(&format!("ssdwatch_collector_success{{collector=\"{c}\"}}")),
            "no health series for {c}:\n{body}"
        );
    }
    assert!(
        !body.contains("collector=\"smart\""),
        "disabled collector shows up"
    );
    assert!(body.contains("ssdwatch_build_info{version=\""));

    tx.send(()).unwrap();
    rt.block_on(server).unwrap().expect("clean shutdown");
}

/// /metrics sends the collectors' published texts as they are, followed by the health series:
/// the body is the whole exposition, with an exact Content-Length (not chunked), on a fixture
/// host whose filesystem and disk texts are tens of KB.
/// The daemon in-process on the nvme-partitions fixture host (SMART and history off), once
/// ready; it stops when the sender is used or dropped.
struct Served {
    rt: tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    _state: tempfile::TempDir,
}

fn serve_fixture_host() -> Served {
    let host = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts/nvme-partitions");
    let state = tempfile::tempdir().unwrap();
    let mut config = Config {
        state_dir: state.path().to_path_buf(),
        ..Config::default()
    };
    config.collectors.smart.enabled = false;
    config.history.enabled = false;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(ssdwatch::run_with_listener(
        config,
        Roots::fixture(&host),
        listener,
        async {
            let _ = rx.await;
        },
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(&format!("http://{addr}/-/ready")).0 != 200 {
        assert!(Instant::now() < deadline, "never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    Served {
        rt,
        addr,
        stop: tx,
        server,
        _state: state,
    }
}

impl Served {
    fn stop(self) {
        self.stop.send(()).unwrap();
        self.rt
            .block_on(self.server)
            .unwrap()
            .expect("clean shutdown");
    }
}

#[test]
fn metrics_body_is_the_whole_exposition_with_its_length() {
    let served = serve_fixture_host();
    let addr = served.addr;
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let mut resp = agent
        .get(&format!("http://{addr}/metrics"))
        .call()
        .expect("scrape");
    let length: usize = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Content-Length header");
    assert!(resp.headers().get("transfer-encoding").is_none());
    let body = resp
        .body_mut()
        .with_config()
        .limit(16 << 20)
        .read_to_string()
        .expect("body");
    assert_eq!(body.len(), length);
    for family in [
        "ssdwatch_filesystem_size_bytes{",
        "ssdwatch_disk_discarded_bytes_total{",
        "ssdwatch_disk_layer_info{",
        "ssdwatch_collector_success{collector=\"filesystem\"} 1",
    ] {
        assert!(body.contains(family), "{family} missing:\n{body}");
    }
    assert!(body.ends_with('\n'));
    served.stop();
}

/// A raw GET of /metrics with the request headers of Prometheus 2.42's scraper; the head of the
/// response (lower-cased) and its body.
fn scrape_raw(addr: std::net::SocketAddr, accept_encoding: Option<&str>) -> (String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let encoding = accept_encoding.map_or(String::new(), |e| format!("Accept-Encoding: {e}\r\n"));
    let req = format!(
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: Prometheus/2.42.0\r\n\
         Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\
         {encoding}X-Prometheus-Scrape-Timeout-Seconds: 10\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    (head, raw[split..].to_vec())
}

/// The exposition's shape: its comment lines and series, without values (a collector may
/// publish between two scrapes, and the process figures change at each).
fn without_live(text: &str) -> String {
    text.lines()
        .map(|l| match l.starts_with('#') {
            true => format!("{l}\n"),
            false => format!("{}\n", l.rsplit_once(' ').map_or(l, |(series, _)| series)),
        })
        .collect()
}

/// Asked as Prometheus asks (`Accept-Encoding: gzip`), /metrics comes in gzip: one valid member
/// holding the same exposition as the plain answer, with its exact length and `Vary`. Without
/// the header, or with gzip refused (`q=0`), it comes as it is.
#[test]
fn a_scrape_asking_for_gzip_gets_the_same_exposition_compressed() {
    use std::io::Read;
    let served = serve_fixture_host();
    let (head, gz) = scrape_raw(served.addr, Some("gzip"));
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("\r\ncontent-encoding: gzip\r\n"), "{head}");
    assert!(head.contains("\r\nvary: accept-encoding\r\n"), "{head}");
    assert!(
        head.contains(&format!("\r\ncontent-length: {}\r\n", gz.len())),
        "{head}"
    );
    let mut unzipped = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut unzipped)
        .expect("a valid gzip body");
    let (plain_head, plain) = scrape_raw(served.addr, None);
    assert!(!plain_head.contains("content-encoding"), "{plain_head}");
    assert!(
        plain_head.contains("\r\nvary: accept-encoding\r\n"),
        "{plain_head}"
    );
    // The plain body is inflated from the published parts as it is sent: its length is
    // still known up front.
    assert!(
        plain_head.contains(&format!("\r\ncontent-length: {}\r\n", plain.len())),
        "{plain_head}"
    );
    let plain = String::from_utf8(plain).unwrap();
    assert_eq!(without_live(&unzipped), without_live(&plain));
    assert!(
        unzipped.contains("ssdwatch_filesystem_size_bytes{"),
        "{unzipped}"
    );
    assert!(
        gz.len() * 3 < plain.len(),
        "{} bytes in gzip for {}",
        gz.len(),
        plain.len()
    );
    // The scrapes counted by encoding, this one included.
    assert!(
        plain.contains("ssdwatch_scrapes_total{encoding=\"gzip\"} 1\n"),
        "{plain}"
    );
    assert!(
        plain.contains("ssdwatch_scrapes_total{encoding=\"identity\"} 1\n"),
        "{plain}"
    );
    for refused in ["gzip;q=0", "identity", "br"] {
        let (head, body) = scrape_raw(served.addr, Some(refused));
        assert!(!head.contains("content-encoding"), "{refused}: {head}");
        assert_eq!(
            without_live(&String::from_utf8(body).unwrap()),
            without_live(&plain),
            "{refused}"
        );
    }
    served.stop();
}

/// `--web.listen-address` given twice, as node_exporter takes it: the daemon serves /metrics
/// on both (`127.0.0.1:0` from the test's command line, then `:0`, every address of the host),
/// and says so once for each.
#[test]
fn the_daemon_listens_on_every_address_given() {
    use crate::support::binary::{Daemon, http_status};
    let d = Daemon::start(&["--web.listen-address", ":0"]);
    let addrs = d.addresses();
    assert_eq!(addrs.len(), 2, "{}", d.log_text());
    assert!(addrs[0].ip().is_loopback(), "{addrs:?}");
    assert!(addrs[1].ip().is_unspecified(), "{addrs:?}");
    assert_ne!(addrs[0].port(), addrs[1].port());
    for a in &addrs {
        let via_loopback = std::net::SocketAddr::from(([127, 0, 0, 1], a.port()));
        assert_eq!(
            http_status(via_loopback, "/metrics", Duration::from_secs(10)),
            200,
            "{a}"
        );
    }
}

/// One address that can't be bound (its port taken) stops the start with that address named,
/// even when the one before it bound: a daemon on half its addresses would look healthy.
#[test]
fn an_address_that_cannot_be_bound_stops_the_start_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let host = crate::support::binary::host();
    let out = crate::support::binary::command(
        host.path(),
        &["--web.listen-address", &format!("127.0.0.1:{port}")],
    )
    .output()
    .expect("run ssdwatch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("listening on 127.0.0.1:{port}")) && err.contains("in use"),
        "{err}"
    );
}

/// benches/scrape_vs_node_exporter.sh in its short mode (20 scrapes each), so the script can't
/// rot: it checks that ssdwatch's gzip body is gzip of the whole exposition and prints both
/// comparisons. Neither is asserted here: the times are the release build's (docs/benchmarks.md),
/// and node_exporter's page holds this machine's own CPU, memory and network series beside the
/// fixture's drives and mounts, so its bytes per series differ from one machine to the next.
#[test]
fn the_scrape_beside_node_exporter_bench_runs_in_its_short_mode() {
    if !crate::support::require_cmd(
        "scrape beside node_exporter bench",
        "prometheus-node-exporter",
        "prometheus-node-exporter",
    ) || !crate::support::require_cmd("scrape beside node_exporter bench", "curl", "curl")
    {
        return;
    }
    let text = crate::support::run_bench_short(
        "scrape_vs_node_exporter.sh",
        std::path::Path::new(env!("CARGO_BIN_EXE_ssdwatch")),
    );
    for line in [
        "ssdwatch-gzip ",
        "node_exporter-gzip ",
        "scrape time, gzip, kept alive",
        "scrape time, plain, kept alive",
        "gzip bytes per series: ssdwatch ",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
}
