//! A real Prometheus (Debian's `prometheus`) for the tests that judge what the shipped rules and
//! dashboards make of the daemon's series: started on a free port in a directory of the test's,
//! asked through its HTTP API, killed when the test ends.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// A real Prometheus (Debian's `prometheus`) in `work`, scraping `target` (host:port, job
/// `ssdwatch`) every second with `rule_files`, once it answers /-/ready.
pub fn start_prometheus(work: &Path, rule_files: &[PathBuf], target: &str) -> (Proc, Prom) {
    start_prometheus_with(work, rule_files, target, 1)
}

/// [`start_prometheus`] with rules evaluated every `eval_seconds` (the default step of a
/// subquery): longer than the scrape interval, as in production (15 s scrapes, 1 min rules).
pub fn start_prometheus_with(
    work: &Path,
    rule_files: &[PathBuf],
    target: &str,
    eval_seconds: u32,
) -> (Proc, Prom) {
    let pport = free_port();
    let pcfg = work.join("prometheus.yml");
    let rules: String = (rule_files.iter())
        .map(|r| format!("  - {}\n", r.display()))
        .collect();
    std::fs::write(
        &pcfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: {eval_seconds}s\n\
             rule_files:\n{rules}\
             scrape_configs:\n  - job_name: ssdwatch\n    static_configs:\n      - targets: ['{target}']\n",
        ),
    )
    .unwrap();
    let mut prometheus = Proc::spawn(
        "prometheus",
        Command::new("prometheus").args([
            &format!("--config.file={}", pcfg.display()),
            &format!("--storage.tsdb.path={}", work.join("tsdb").display()),
            &format!("--web.listen-address=127.0.0.1:{pport}"),
            "--log.level=warn",
        ]),
        work.join("prometheus.log"),
    );
    let prom = Prom {
        base: format!("http://127.0.0.1:{pport}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        prometheus.assert_running();
        if matches!(get(&format!("{}/-/ready", prom.base)), Some((200, _))) {
            break;
        }
        assert!(Instant::now() < deadline, "prometheus did not become ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    (prometheus, prom)
}

/// A child process killed (and reaped) when the test ends, also on panic.
pub struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &'static str, cmd: &mut Command, log: PathBuf) -> Proc {
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc { name, child, log }
    }

    /// Stops it as systemd would (SIGTERM), and waits for it to exit.
    pub fn stop(&mut self) {
        assert!(
            crate::support::stop_child(&mut self.child, Duration::from_secs(60)),
            "{} did not stop on SIGTERM",
            self.name
        );
    }

    pub fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!("{} exited early ({st}):\n{log}", self.name);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .new_agent()
}

pub fn get(url: &str) -> Option<(u16, String)> {
    let mut r = agent().get(url).call().ok()?;
    let status = r.status().as_u16();
    Some((status, r.body_mut().read_to_string().ok()?))
}

pub struct Prom {
    pub base: String,
}

/// Calls a Prometheus HTTP API endpoint; Err carries Prometheus' own error message.
pub fn api(req: ureq::RequestBuilder<ureq::typestate::WithoutBody>) -> Result<Json, String> {
    let mut r = req.call().map_err(|e| format!("HTTP: {e}"))?;
    let body = r
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("body: {e}"))?;
    let j: Json = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if j["status"] != "success" {
        return Err(format!("{}: {}", j["errorType"], j["error"]));
    }
    Ok(j)
}

impl Prom {
    /// Instant query; Err carries Prometheus' error message.
    pub fn query(&self, expr: &str) -> Result<Vec<Json>, String> {
        let j = api(agent()
            .get(&format!("{}/api/v1/query", self.base))
            .query("query", expr))?;
        match j["data"]["resultType"].as_str() {
            Some("vector") | Some("matrix") => {
                Ok(j["data"]["result"].as_array().cloned().unwrap_or_default())
            }
            Some("scalar") | Some("string") => Ok(vec![j["data"]["result"].clone()]),
            other => Err(format!("unexpected result type {other:?}")),
        }
    }

    /// Instant query at `time`, as a dashboard's instant queries run at the end of its range.
    pub fn query_at(&self, expr: &str, time: f64) -> Result<Vec<Json>, String> {
        let j = api(agent()
            .get(&format!("{}/api/v1/query", self.base))
            .query("query", expr)
            .query("time", format!("{time:.3}")))?;
        match j["data"]["resultType"].as_str() {
            Some("vector") | Some("matrix") => {
                Ok(j["data"]["result"].as_array().cloned().unwrap_or_default())
            }
            other => Err(format!("unexpected result type {other:?}")),
        }
    }

    /// A range query at 1 s steps, as Grafana evaluates panels and annotations over the
    /// dashboard's time range.
    pub fn query_range(&self, expr: &str, start: f64, end: f64) -> Result<Vec<Json>, String> {
        self.query_range_every(expr, start, end, 1.0)
    }

    /// A range query at `step` seconds.
    pub fn query_range_every(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step: f64,
    ) -> Result<Vec<Json>, String> {
        let j = api(agent()
            .get(&format!("{}/api/v1/query_range", self.base))
            .query("query", expr)
            .query("start", format!("{start:.3}"))
            .query("end", format!("{end:.3}"))
            .query("step", format!("{step}")))?;
        Ok(j["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    pub fn wait_for(&self, what: &str, expr: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            match self.query(expr) {
                Ok(r) if !r.is_empty() => return,
                Ok(_) => {}
                Err(e) => panic!("waiting for {what}: query {expr} failed: {e}"),
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} ({expr})"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}
