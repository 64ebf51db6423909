//! A real Prometheus (Debian's `prometheus`) scraping the real daemon gets its /metrics in
//! gzip, as it asks on every scrape, and reads every series of it.

use crate::support::binary::Daemon;
use crate::support::prometheus::start_prometheus;
use crate::support::require_cmd;
use std::time::Duration;

#[test]
fn prometheus_scrapes_the_daemon_in_gzip_and_reads_every_series() {
    if !require_cmd("prometheus gzip", "prometheus", "prometheus") {
        return;
    }
    let d = Daemon::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let (mut prometheus, prom) = start_prometheus(work.path(), &[], &d.addr.to_string());
    // The daemon's own count of what it served, as Prometheus stored it: gzip only.
    prom.wait_for(
        "a scrape answered in gzip",
        r#"ssdwatch_scrapes_total{encoding="gzip"} >= 3"#,
        Duration::from_secs(30),
    );
    prometheus.assert_running();
    let value = |expr: &str| -> f64 {
        let r = prom.query(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(r.len(), 1, "{expr}: {r:?}");
        r[0]["value"][1].as_str().unwrap().parse().unwrap()
    };
    assert_eq!(value(r#"up{job="ssdwatch"}"#), 1.0);
    assert_eq!(
        value(r#"ssdwatch_scrapes_total{encoding="identity"}"#),
        0.0,
        "Prometheus was answered without gzip"
    );
    // Every series of the exposition reached Prometheus: as many as a plain scrape shows.
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    let body = agent
        .get(&format!("http://{}/metrics", d.addr))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let series = body.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(
        value(r#"scrape_samples_scraped{job="ssdwatch"}"#) as usize,
        series,
        "{body}"
    );
}
