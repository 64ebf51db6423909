//! The real `ssdwatch` binary, as the web, CLI and report tests start it: on an empty fixture
//! host at 127.0.0.1:0 (the address read from its log), test certificates made with rcgen,
//! and curl. The daemon is stopped by its own PID when the guard drops.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

/// A host with no block devices and no mounts, and a config that only sets the state dir
/// and turns smartctl off.
pub fn host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path();
    for d in [
        "sys/block",
        "sys/class/block",
        "proc/self",
        "rootfs",
        "state",
    ] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join("proc/self/mountinfo"), "").unwrap();
    std::fs::write(
        p.join("ssdwatch.yaml"),
        format!(
            // No SMART and no layers: nothing for the privileged helper to do, so it isn't started.
            "state_dir: {}\ncollectors:\n  smart:\n    enabled: false\n  layers:\n    enabled: false\n",
            p.join("state").display()
        ),
    )
    .unwrap();
    dir
}

/// The binary's command line on `dir` (a `host()`), plus `extra`.
pub fn command(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ssdwatch"));
    cmd.arg("--config")
        .arg(dir.join("ssdwatch.yaml"))
        .arg("--path.sysfs")
        .arg(dir.join("sys"))
        .arg("--path.procfs")
        .arg(dir.join("proc"))
        .arg("--path.rootfs")
        .arg(dir.join("rootfs"))
        .args(["--web.listen-address", "127.0.0.1:0"])
        .args(extra);
    cmd
}

impl Daemon {
    /// Starts the daemon on `dir` and waits for it to serve.
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Daemon {
        Daemon::start_with(dir, extra, |_| {})
    }

    /// Starts the daemon on `dir` with the command made ready by `prepare` first (limits, a
    /// cgroup to start in), and waits for it to serve.
    pub fn start_with(
        dir: tempfile::TempDir,
        extra: &[&str],
        prepare: impl FnOnce(&mut Command),
    ) -> Daemon {
        let mut cmd = command(dir.path(), extra);
        prepare(&mut cmd);
        Daemon::spawn(dir, cmd)
    }

    /// Runs `cmd` (the binary's command line, made ready) with its log in `dir`, and waits for
    /// it to serve.
    pub fn spawn(dir: tempfile::TempDir, mut cmd: Command) -> Daemon {
        let log = dir.path().join("daemon.log");
        let child = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start ssdwatch");
        let mut d = Daemon {
            dir,
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = d.log_text();
            if let Some(addr) = serving_addresses(&text).first() {
                d.addr = *addr;
                return d;
            }
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!("ssdwatch exited with {status}:\n{text}");
            }
            assert!(Instant::now() < deadline, "never served:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `/metrics` over plain HTTP, with the daemon's log in the panic when it does not answer.
    pub fn metrics(&self) -> String {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .new_agent();
        agent
            .get(&format!("http://{}/metrics", self.addr))
            .call()
            .unwrap_or_else(|e| panic!("GET /metrics: {e}\nlog:\n{}", self.log_text()))
            .body_mut()
            .read_to_string()
            .expect("body")
    }

    /// Every address the daemon said it serves on (one line each, all logged at once).
    pub fn addresses(&self) -> Vec<SocketAddr> {
        serving_addresses(&self.log_text())
    }

    pub fn start(extra: &[&str]) -> Daemon {
        Daemon::start_in(host(), extra)
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).expect("kill");
    }

    /// Waits for the log to contain `needle`.
    pub fn wait_log(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.log_text().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Plain-HTTP GET of `path`; the status code.
    pub fn get_status(&self, path: &str) -> u16 {
        http_status(self.addr, path, Duration::from_secs(10))
    }
}

/// The addresses of the daemon's "serving /metrics" lines, in logfmt (`address=…`) or JSON
/// (`"address":"…"`).
pub fn serving_addresses(log: &str) -> Vec<SocketAddr> {
    log.lines()
        .filter(|l| l.contains("serving /metrics"))
        .filter_map(|l| {
            let logfmt = l
                .split(" address=")
                .nth(1)
                .and_then(|a| a.split_whitespace().next());
            let json = l
                .split("\"address\":\"")
                .nth(1)
                .and_then(|a| a.split('"').next());
            logfmt.or(json)?.parse().ok()
        })
        .collect()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw HTTP/1.1 GET; the status code, 0 when none came.
pub fn http_status(addr: SocketAddr, path: &str, timeout: Duration) -> u16 {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, timeout) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(timeout));
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A CA, a server certificate for 127.0.0.1/localhost and a client certificate, as PEM files
/// in `dir`: ca.crt, server.crt, server.key, client.crt, client.key.
pub fn make_certs(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    // Distinct names: a leaf whose issuer name equals its own looks self-signed to OpenSSL.
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "ssdwatch test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
    for (name, sans) in [
        (
            "server",
            vec!["localhost".to_string(), "127.0.0.1".to_string()],
        ),
        ("client", vec!["scraper.example".to_string()]),
    ] {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("ssdwatch test {name}"));
        let cert = params.signed_by(&key, &ca).unwrap();
        std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

/// curl against the daemon over HTTPS with the test CA; `args` come before the URL.
pub fn curl(d: &Daemon, path: &str, args: &[&str]) -> Output {
    Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-D",
            "-",
            "-w",
            "%{http_code}",
        ])
        .arg("--cacert")
        .arg(d.dir.path().join("ca.crt"))
        .args(args)
        .arg(format!("https://127.0.0.1:{}{path}", d.addr.port()))
        .output()
        .expect("run curl")
}

/// The status curl got (the last line of its output), 0 for none (e.g. a refused handshake).
pub fn curl_status(out: &Output) -> u16 {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .last()
        .and_then(|l| l.trim().get(l.trim().len().saturating_sub(3)..))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}
