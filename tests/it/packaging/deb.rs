//! The Debian package as an operator meets it: built with the one command
//! (packaging/deb/build.sh), checked by lintian, installed with `dpkg -i` on this machine, run
//! as its own system user, removed (config and state stay) and purged (nothing stays).
//! Needs root; the machine is left as it was found (the package is purged even on failure).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TEST: &str = "deb";

/// lintian's warnings that remain, each explained in docs/packaging.md. A new one fails the
/// test: fix it or explain it there and here.
const ACCEPTED_WARNINGS: &[&str] = &["initial-upload-closes-no-bugs"];

fn sh(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"))
}

fn ok(cmd: &str, args: &[&str]) -> String {
    let out = sh(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn installed() -> bool {
    sh("dpkg-query", &["-W", "-f=${Status}", "ssdwatch"])
        .stdout
        .starts_with(b"install ok")
}

fn field(name: &str) -> String {
    ok(
        "dpkg-query",
        &["-W", &format!("-f=${{{name}}}"), "ssdwatch"],
    )
}

fn user_exists(name: &str) -> bool {
    sh("getent", &["passwd", name]).status.success()
}

fn group_exists(name: &str) -> bool {
    sh("getent", &["group", name]).status.success()
}

/// Paths the package owns or its scripts make, which other tests or a run of the daemon as
/// root may have left (the default `state_dir` is /var/lib/ssdwatch).
const HOST_PATHS: &[&str] = &[
    "/var/lib/ssdwatch",
    "/etc/ssdwatch",
    "/etc/default/ssdwatch",
];

/// Leaves the machine as it was: moves what already exists at [`HOST_PATHS`] aside first; when
/// the test ends, however it ends, purges the package and puts those paths back.
struct Restore {
    moved: Vec<(PathBuf, PathBuf)>,
}

impl Restore {
    fn new() -> Restore {
        let mut moved = Vec::new();
        for p in HOST_PATHS {
            let p = PathBuf::from(p);
            if p.symlink_metadata().is_ok() {
                let aside = PathBuf::from(format!("{}.before-deb-test", p.display()));
                std::fs::rename(&p, &aside)
                    .unwrap_or_else(|e| panic!("moving {} aside: {e}", p.display()));
                moved.push((p, aside));
            }
        }
        Restore { moved }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "ssdwatch"]).output();
        for (p, aside) in &self.moved {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
            if let Err(e) = std::fs::rename(aside, p) {
                eprintln!("putting {} back from {}: {e}", p.display(), aside.display());
            }
        }
    }
}

/// Builds the package once with the project's one command; the path of the .deb.
fn build() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = support::as_from_shell(&mut Command::new(root.join("packaging/deb/build.sh")))
        .output()
        .expect("run packaging/deb/build.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "build.sh failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or("").trim();
    let deb = root.join(last);
    assert!(
        last.ends_with(".deb") && deb.is_file(),
        "build.sh's last line is not the .deb: {stdout}"
    );
    deb
}

/// lintian's tags of one severity letter (E, W) as `tag extra`, one per finding.
fn lintian_tags(report: &str, severity: char) -> Vec<String> {
    report
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{severity}: ssdwatch")))
        .filter_map(|l| l.split_once(": ").map(|(_, t)| t.to_string()))
        .collect()
}

#[test]
fn the_package_installs_runs_as_its_own_user_and_purge_leaves_nothing() {
    if !support::require_root(TEST)
        || !support::require_cmd(TEST, "dpkg", "dpkg")
        || !support::require_cmd(TEST, "lintian", "lintian")
        || !support::require_cmd(
            TEST,
            "cargo-deb",
            "cargo-deb (cargo install cargo-deb --locked)",
        )
    {
        return;
    }
    if installed() || user_exists("ssdwatch") || group_exists("ssdwatch") {
        support::skip(
            TEST,
            "an ssdwatch package, user or group is already on this machine; the test installs and purges its own",
        );
        return;
    }
    let deb = build();
    let deb_s = deb.to_str().unwrap();

    // lintian: no error; the warnings are the documented ones.
    let lint = sh("lintian", &["--no-tag-display-limit", deb_s]);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    assert!(
        lintian_tags(&report, 'E').is_empty(),
        "lintian errors:\n{report}"
    );
    let mut warnings: Vec<String> = lintian_tags(&report, 'W')
        .into_iter()
        .map(|t| t.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    warnings.dedup();
    assert_eq!(
        warnings, ACCEPTED_WARNINGS,
        "lintian warnings changed:\n{report}"
    );

    let _restore = Restore::new();
    // No systemd runs here (as on a container or a chroot): the install must not fail for it.
    ok("dpkg", &["-i", deb_s]);
    assert!(installed());

    // Files where the package says.
    for f in [
        "/usr/bin/ssdwatch",
        "/etc/ssdwatch/ssdwatch.yaml",
        "/etc/default/ssdwatch",
        "/usr/share/man/man1/ssdwatch.1.gz",
        "/usr/share/man/man1/ssdwatch-sample.1.gz",
        "/usr/share/man/man1/ssdwatch-probe-run.1.gz",
        "/usr/share/bash-completion/completions/ssdwatch",
        "/usr/share/zsh/vendor-completions/_ssdwatch",
        "/usr/share/fish/vendor_completions.d/ssdwatch.fish",
        "/usr/share/ssdwatch/dashboards/ssdwatch-host.json",
        "/usr/share/ssdwatch/dashboards/ssdwatch-degradation.json",
        "/usr/share/ssdwatch/dashboards/ssdwatch-fleet.json",
        "/usr/share/ssdwatch/prometheus/ssdwatch.rules.yml",
        "/usr/share/ssdwatch/prometheus/ssdwatch.alerts.yml",
        "/usr/share/ssdwatch/prometheus/ssdwatch.optional.alerts.yml",
        "/usr/share/ssdwatch/grafana/provisioning/dashboards/ssdwatch.yaml",
        "/usr/share/ssdwatch/grafana/provisioning/datasources/prometheus.yaml",
        "/usr/share/doc/ssdwatch/copyright",
    ] {
        assert!(Path::new(f).is_file(), "{f} not installed");
    }
    let listed = ok("dpkg", &["-L", "ssdwatch"]);
    let unit = listed
        .lines()
        .find(|l| l.ends_with("/systemd/system/ssdwatch.service"))
        .unwrap_or_else(|| panic!("no unit in the package:\n{listed}"));
    let unit_text = std::fs::read_to_string(unit).unwrap();
    assert!(
        unit_text.contains("EnvironmentFile=-/etc/default/ssdwatch")
            && unit_text.contains("$ARGS")
            && unit_text.contains("ExecReload=/bin/kill -HUP $MAINPID"),
        "{unit_text}"
    );

    // The config is the commented example, which equals the built-in defaults (tested in
    // src/config.rs), and it and /etc/default/ssdwatch are conffiles.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/ssdwatch.example.yaml"
    ))
    .unwrap();
    assert_eq!(
        std::fs::read_to_string("/etc/ssdwatch/ssdwatch.yaml").unwrap(),
        example
    );
    let conffiles = field("Conffiles");
    for f in ["/etc/ssdwatch/ssdwatch.yaml", "/etc/default/ssdwatch"] {
        assert!(
            conffiles
                .lines()
                .any(|l| l.trim().starts_with(&format!("{f} "))),
            "{f} is not a conffile: {conffiles}"
        );
    }
    let depends = field("Depends");
    assert!(depends.contains("smartmontools"), "{depends}");

    // The man page and the completions came from the binary's own flags.
    let man = ok("sh", &["-c", "gzip -dc /usr/share/man/man1/ssdwatch.1.gz"]).replace("\\-", "-");
    assert!(
        man.contains("--no-collector.smart") && man.contains("--web.config.file"),
        "{man}"
    );

    // A system user and group, home in the state directory, which it owns.
    let pw = ok("getent", &["passwd", "ssdwatch"]);
    let f: Vec<&str> = pw.trim().split(':').collect();
    let uid: u32 = f[2].parse().unwrap();
    assert!(uid < 1000, "a system uid: {pw}");
    assert_eq!(f[5], "/var/lib/ssdwatch", "{pw}");
    assert!(f[6].ends_with("nologin") || f[6] == "/bin/false", "{pw}");
    assert!(group_exists("ssdwatch"));
    let st = ok("stat", &["-c", "%U:%G %a", "/var/lib/ssdwatch"]);
    assert_eq!(st.trim(), "ssdwatch:ssdwatch 750");

    let version = ok("/usr/bin/ssdwatch", &["--version"]);
    assert_eq!(
        version.trim(),
        format!("ssdwatch {}", env!("CARGO_PKG_VERSION"))
    );

    // One sample as the service's user, with the installed config.
    let out = sh(
        "runuser",
        &[
            "-u",
            "ssdwatch",
            "--",
            "/usr/bin/ssdwatch",
            "--config",
            "/etc/ssdwatch/ssdwatch.yaml",
            "--log.level=error",
            "sample",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "ssdwatch_collector_success{collector=\"filesystem\"} 1",
        "ssdwatch_collector_success{collector=\"diskstats\"} 1",
        "ssdwatch_collector_success{collector=\"topology\"} 1",
        "process_resident_memory_bytes ",
        "ssdwatch_filesystem_size_bytes{",
    ] {
        assert!(
            text.contains(want),
            "sample as ssdwatch lacks {want:?} ({}):\n{}\n{text}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // A probe target as the README sets one up; a run by hand as root runs as the service's
    // user and leaves the daemon's probe directory, which the purge must give back.
    let fs = support::LoopFs::no_reserve(128);
    let target = fs.mountpoint.join("ssdwatch");
    ok(
        "install",
        &[
            "-d",
            "-o",
            "ssdwatch",
            "-g",
            "ssdwatch",
            "-m",
            "0750",
            target.to_str().unwrap(),
        ],
    );
    let cfg = fs.dir.path().join("probe.yaml");
    std::fs::write(
        &cfg,
        format!(
            "state_dir: /var/lib/ssdwatch\ncollectors:\n  probe:\n    targets:\n      - {{path: {:?}, free_floor_bytes: 8MiB}}\n",
            target
        ),
    )
    .unwrap();
    let run = sh(
        "/usr/bin/ssdwatch",
        &[
            "--config",
            cfg.to_str().unwrap(),
            "probe",
            "run",
            "--target",
            target.to_str().unwrap(),
        ],
    );
    let probe_dir = target.join(".ssdwatch-probe");
    assert!(
        probe_dir.join("probe.dat").is_file(),
        "no probe file after a hand run ({}): {}{}",
        run.status,
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        ok("stat", &["-c", "%U", probe_dir.to_str().unwrap()]).trim(),
        "ssdwatch"
    );

    // Removal keeps the config, the state and the user.
    std::fs::write("/var/lib/ssdwatch/kept", "state").unwrap();
    ok("dpkg", &["--remove", "ssdwatch"]);
    assert!(!Path::new("/usr/bin/ssdwatch").exists());
    assert!(Path::new("/etc/ssdwatch/ssdwatch.yaml").exists());
    assert!(Path::new("/etc/default/ssdwatch").exists());
    assert!(Path::new("/var/lib/ssdwatch/kept").exists());
    assert!(user_exists("ssdwatch"));

    // Purge removes everything the package and its scripts made.
    ok("dpkg", &["--purge", "ssdwatch"]);
    for p in [
        "/etc/ssdwatch",
        "/etc/default/ssdwatch",
        "/var/lib/ssdwatch",
        "/usr/share/ssdwatch",
    ] {
        assert!(!Path::new(p).exists(), "{p} left after purge");
    }
    assert!(
        !probe_dir.exists(),
        "{} left after purge",
        probe_dir.display()
    );
    assert!(!user_exists("ssdwatch"), "user left after purge");
    assert!(!group_exists("ssdwatch"), "group left after purge");
    assert!(!installed());
}
