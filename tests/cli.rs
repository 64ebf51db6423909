//! The command line as a user meets it: bad configs are refused with the key and line named,
//! and the one-shot mode prints an exposition.

use std::process::Command;

fn ssdwatch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ssdwatch"))
}

fn write_config(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temp file");
    std::fs::write(f.path(), text).expect("write config");
    f
}

#[test]
fn unknown_config_key_is_refused_with_key_and_line() {
    let cfg = write_config(
        "web:\n  listen_address: 127.0.0.1:0\ncollectors:\n  diskstats:\n    intervall: 5s\n",
    );
    let out = ssdwatch()
        .args(["--config"])
        .arg(cfg.path())
        .arg("sample")
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&cfg.path().display().to_string()), "{err}");
    assert!(err.contains("intervall"), "{err}");
    assert!(err.contains("line 5"), "{err}");
}

#[test]
fn wrong_type_is_refused_with_key_path_and_line() {
    let cfg = write_config("collectors:\n  filesystem:\n    interval: often\n");
    let out = ssdwatch()
        .arg("--config")
        .arg(cfg.path())
        .arg("sample")
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("collectors.filesystem.interval"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn missing_config_file_is_refused_with_its_path() {
    let out = ssdwatch()
        .args(["--config", "/nonexistent/dir/ssdwatch.yaml", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/dir/ssdwatch.yaml"), "{err}");
}

#[test]
fn bad_listen_flag_is_refused() {
    let out = ssdwatch()
        .args(["--web.listen-address", "localhost", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--web.listen-address"));
}

#[test]
fn a_bad_log_level_is_refused_naming_the_flag_instead_of_becoming_info() {
    let out = ssdwatch()
        .args(["--log.level", "loud", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--log.level \"loud\""), "{err}");
    assert!(out.stdout.is_empty(), "nothing sampled with a bad flag");
}

#[test]
fn example_config_is_accepted() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/ssdwatch.example.yaml");
    let out = ssdwatch()
        .args(["--config", example, "--help"])
        .output()
        .expect("run ssdwatch");
    assert!(out.status.success());
}

#[test]
fn sample_exits_1_when_a_collector_failed_and_still_prints_the_rest() {
    let out = ssdwatch()
        .args(["--path.procfs", "/nonexistent", "sample"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ssdwatch_collector_success{collector=\"filesystem\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("ssdwatch_collector_success{collector=\"diskstats\"} 1"),
        "{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/self/mountinfo"), "{err}");
}

#[test]
fn probe_run_refuses_an_unknown_kind_with_exit_2_and_reports_a_missing_target_as_error() {
    let out = ssdwatch()
        .args(["probe", "run", "--target", "/tmp", "--kind", "bogus"])
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--kind bogus"), "{err}");
    assert!(
        err.contains("sync_write_4k"),
        "names the valid kinds: {err}"
    );

    let missing = tempfile::tempdir().unwrap().path().join("gone");
    let out = ssdwatch()
        .args(["probe", "run", "--json", "--target"])
        .arg(&missing)
        .output()
        .expect("run ssdwatch");
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["outcome"], "skipped");
    assert_eq!(v["reason"], "error");
    assert!(
        v["detail"]
            .as_str()
            .is_some_and(|d| d.contains(missing.to_str().unwrap())),
        "{v}"
    );
}
