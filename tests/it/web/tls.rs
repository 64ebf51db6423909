//! The web config file as a node_exporter user writes it, against the real binary and curl:
//! TLS with basic auth, client certificates, TLS versions, live reloads, and the startup
//! errors that name the file.

use crate::support::binary;

use crate::support::binary::{Daemon, curl, curl_status, host, make_certs};
use std::time::Duration;

/// A `$2y$` hash as htpasswd makes it (`htpasswd -nBC 10`).
fn htpasswd(password: &str) -> String {
    bcrypt::hash_with_result(password, 10)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY)
}

/// A daemon with certificates in its dir and `web.yml` holding `web_config`.
fn start(web_config: &str) -> Daemon {
    let dir = host();
    make_certs(dir.path());
    std::fs::write(dir.path().join("web.yml"), web_config).unwrap();
    let web = dir.path().join("web.yml");
    Daemon::start_in(dir, &["--web.config.file", web.to_str().unwrap()])
}

/// curl's arguments for the client certificate and key made in `dir`.
fn client_cert(dir: &std::path::Path) -> Vec<String> {
    let arg = |f: &str| dir.join(f).to_string_lossy().into_owned();
    vec![
        "--cert".into(),
        arg("client.crt"),
        "--key".into(),
        arg("client.key"),
    ]
}

/// A client certificate from a CA of its own, which the daemon's CA never signed.
fn foreign_client_cert(d: &Daemon) -> Vec<String> {
    let other = d.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    make_certs(&other);
    client_cert(&other)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn tls_with_basic_auth_lets_the_right_password_in_and_nobody_else() {
    // exporter-toolkit's documented format, paths relative to the web config's directory.
    let d = start(&format!(
        "# node_exporter web config\ntls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
         basic_auth_users:\n  prometheus: {}\n\
         http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n",
        htpasswd("s3cret")
    ));
    let ok = curl(&d, "/metrics", &["-u", "prometheus:s3cret"]);
    assert_eq!(curl_status(&ok), 200, "{ok:?}");
    let headers = String::from_utf8_lossy(&ok.stdout).to_ascii_lowercase();
    assert!(
        headers.contains("x-content-type-options: nosniff"),
        "{headers}"
    );
    assert!(headers.contains("x-frame-options: deny"), "{headers}");
    // Again: answered from the cache, still 200.
    assert_eq!(
        curl_status(&curl(&d, "/metrics", &["-u", "prometheus:s3cret"])),
        200
    );

    let wrong = curl(&d, "/metrics", &["-u", "prometheus:guess"]);
    assert_eq!(curl_status(&wrong), 401);
    let unknown = curl(&d, "/metrics", &["-u", "mallory:s3cret"]);
    assert_eq!(curl_status(&unknown), 401);
    let none = curl(&d, "/metrics", &[]);
    assert_eq!(curl_status(&none), 401);
    let headers = String::from_utf8_lossy(&none.stdout).to_ascii_lowercase();
    assert!(headers.contains("www-authenticate: basic"), "{headers}");
    assert!(
        headers.contains("x-frame-options: deny"),
        "extra headers on 401 too: {headers}"
    );

    // Plain HTTP on the TLS port gets no page.
    assert_ne!(d.get_status("/metrics"), 200);
}

#[test]
fn a_required_client_certificate_refuses_the_handshake_without_one() {
    let d = start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    );
    let without = curl(&d, "/metrics", &[]);
    assert_eq!(curl_status(&without), 0, "{without:?}");
    let with = curl(&d, "/metrics", &strs(&client_cert(d.dir.path())));
    assert_eq!(curl_status(&with), 200, "{with:?}");
}

#[test]
fn client_allowed_sans_refuses_a_valid_certificate_with_another_name() {
    let d = start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
         client_allowed_sans: [other.example]\n",
    );
    let dir = d.dir.path();
    let owned = client_cert(dir);
    let args = strs(&owned);
    assert_eq!(curl_status(&curl(&d, "/metrics", &args)), 0);
    std::fs::write(
        dir.join("web.yml"),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
         client_allowed_sans: [scraper.example]\n",
    )
    .unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log("web config reloaded", Duration::from_secs(10)),
        "{}",
        d.log_text()
    );
    assert_eq!(curl_status(&curl(&d, "/metrics", &args)), 200);
}

#[test]
fn a_tls11_client_is_refused_when_the_minimum_is_tls12() {
    let d = start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS12\n",
    );
    // SECLEVEL=0 so that curl's OpenSSL really sends a TLS 1.1 hello: the refusal must be
    // the server's alert, not the client's own policy.
    let old = curl(
        &d,
        "/metrics",
        &[
            "--tlsv1.0",
            "--tls-max",
            "1.1",
            "--ciphers",
            "DEFAULT@SECLEVEL=0",
        ],
    );
    assert_eq!(curl_status(&old), 0, "{old:?}");
    assert!(
        String::from_utf8_lossy(&old.stderr).contains("alert"),
        "{old:?}"
    );
    let tls12 = curl(&d, "/metrics", &["--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(curl_status(&tls12), 200, "{tls12:?}");
}

#[test]
fn min_version_tls10_is_taken_as_tls12_with_a_log_line() {
    let d = start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS10\n",
    );
    assert!(
        d.log_text().contains("TLS 1.2 is the floor"),
        "{}",
        d.log_text()
    );
    assert_eq!(curl_status(&curl(&d, "/metrics", &["--tls-max", "1.1"])), 0);
    assert_eq!(curl_status(&curl(&d, "/metrics", &[])), 200);
}

#[test]
fn a_new_password_hash_is_picked_up_without_a_restart_and_a_broken_file_keeps_the_old_one() {
    let d = start(&format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  p: {}\n",
        htpasswd("old")
    ));
    assert_eq!(curl_status(&curl(&d, "/metrics", &["-u", "p:old"])), 200);
    let web = d.dir.path().join("web.yml");
    // Changed on disk, no signal: the poll notices.
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  p: {}\n",
            htpasswd("new")
        ),
    )
    .unwrap();
    assert!(d.wait_log(
        "a watched file changed: web config reloaded",
        Duration::from_secs(10)
    ));
    assert_eq!(curl_status(&curl(&d, "/metrics", &["-u", "p:new"])), 200);
    assert_eq!(curl_status(&curl(&d, "/metrics", &["-u", "p:old"])), 401);
    // A broken file: logged, the previous config stays.
    std::fs::write(&web, "basic_auth_users:\n  p: not-a-hash\n").unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        d.wait_log("web config not reloaded", Duration::from_secs(10)),
        "{}",
        d.log_text()
    );
    assert!(d.log_text().contains("basic_auth_users.p"));
    assert_eq!(curl_status(&curl(&d, "/metrics", &["-u", "p:new"])), 200);
}

/// Runs the binary with `web_config` (in a dir with certificates) and expects exit 2 with
/// `wants` in its message.
fn refused_at_start(web_config: &str, wants: &[&str]) {
    let dir = host();
    make_certs(dir.path());
    let web = dir.path().join("web.yml");
    std::fs::write(&web, web_config).unwrap();
    let out = binary::command(dir.path(), &["--web.config.file", web.to_str().unwrap()])
        .output()
        .expect("run ssdwatch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(web.to_str().unwrap()), "names the file: {err}");
    for w in wants {
        assert!(err.contains(w), "{w:?} in {err}");
    }
}

#[test]
fn a_bad_bcrypt_hash_stops_the_start_naming_file_and_user() {
    refused_at_start(
        "basic_auth_users:\n  alice: plaintext\n",
        &["basic_auth_users.alice", "bcrypt"],
    );
}

#[test]
fn a_missing_certificate_file_stops_the_start_naming_it() {
    refused_at_start(
        "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: server.key\n",
        &["tls_server_config.cert_file", "nowhere.crt", "No such file"],
    );
}

#[test]
fn an_unknown_key_stops_the_start_with_its_line() {
    refused_at_start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cert_fiel: x\n",
        &["cert_fiel", "line 4"],
    );
}

#[test]
fn a_node_exporter_web_config_using_every_documented_key_loads_and_serves() {
    // Every key of exporter-toolkit's web-configuration.md that applies to a file-based setup,
    // spelled as documented.
    let d = start(&format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
         client_allowed_sans:\n    - scraper.example\n  \
         min_version: TLS12\n  max_version: TLS13\n  \
         cipher_suites:\n    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305\n  \
         prefer_server_cipher_suites: true\n  \
         curve_preferences:\n    - X25519\n    - CurveP256\n\
         http_server_config:\n  http2: true\n  headers:\n    \
         Content-Security-Policy: default-src 'self'\n    X-Frame-Options: sameorigin\n    \
         X-Content-Type-Options: nosniff\n    X-XSS-Protection: \"1; mode=block\"\n    \
         Strict-Transport-Security: max-age=31536000\n\
         basic_auth_users:\n  prometheus: {}\n\
         rate_limit:\n  interval: 100ms\n  burst: 20\n",
        htpasswd("s3cret")
    ));
    let mut args = client_cert(d.dir.path());
    args.extend(["-u", "prometheus:s3cret", "--tls-max", "1.2"].map(String::from));
    let out = curl(&d, "/metrics", &strs(&args));
    assert_eq!(curl_status(&out), 200, "{out:?}");
    let headers = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(
        headers.contains("strict-transport-security: max-age=31536000"),
        "{headers}"
    );
    assert!(
        headers.contains("x-xss-protection: 1; mode=block"),
        "{headers}"
    );
}

#[test]
fn rate_limit_answers_429_once_the_burst_is_spent() {
    let d = start("rate_limit:\n  interval: 1h\n  burst: 2\n");
    assert_eq!(d.get_status("/-/healthy"), 200);
    assert_eq!(d.get_status("/-/healthy"), 200);
    assert_eq!(d.get_status("/-/healthy"), 429);
}

#[test]
fn verify_if_given_takes_no_certificate_but_refuses_one_from_another_ca() {
    let d = start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n",
    );
    assert_eq!(curl_status(&curl(&d, "/metrics", &[])), 200);
    let foreign = foreign_client_cert(&d);
    assert_eq!(curl_status(&curl(&d, "/metrics", &strs(&foreign))), 0);
}

#[test]
fn require_any_takes_a_certificate_from_any_ca_but_not_none() {
    let d = start(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAnyClientCert\n",
    );
    assert_eq!(curl_status(&curl(&d, "/metrics", &[])), 0);
    let foreign = foreign_client_cert(&d);
    assert_eq!(curl_status(&curl(&d, "/metrics", &strs(&foreign))), 200);
}

/// Plain HTTP to the TLS port (a scrape config that forgot `scheme: https`) is answered as
/// exporter-toolkit's Go server answers it: `400 Bad Request`, "Client sent an HTTP request to
/// an HTTPS server.", then the connection closes; HTTPS on the same port still works.
#[test]
fn plain_http_to_the_tls_port_gets_400_saying_so() {
    use std::io::{Read, Write};
    let d = start("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .expect("the answer, then a close");
    assert_eq!(
        String::from_utf8_lossy(&answer),
        "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    // What curl tells its user, as for a Go exporter.
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .arg(format!("http://127.0.0.1:{}/metrics", d.addr.port()))
        .output()
        .expect("run curl");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("Client sent an HTTP request to an HTTPS server."),
        "{out:?}"
    );
    // Anything else that is not TLS is closed without a word, and TLS still works.
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"\x00\x01garbage").unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(answer.is_empty(), "{answer:?}");
    assert_eq!(curl_status(&curl(&d, "/metrics", &[])), 200);
}
