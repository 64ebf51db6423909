//! The test command's start (`tests/run.sh --preflight`): it finds the Rust toolchain in the
//! environments root gets from `sudo` (the invoking user's PATH and HOME are gone, SUDO_USER
//! names them) and from `su` without `-` or a CI job (root's own rustup toolchain off PATH).

use crate::support::*;
use std::path::Path;
use std::process::Command;

/// Where cargo's rustup proxy lives for this user: `$CARGO_HOME/bin`, else `$HOME/.cargo/bin`.
fn cargo_home() -> Option<String> {
    let home = std::env::var("CARGO_HOME")
        .ok()
        .or_else(|| Some(format!("{}/.cargo", std::env::var("HOME").ok()?)))?;
    Path::new(&home).join("bin/cargo").exists().then_some(home)
}

/// Runs the preflight with only `vars` set (as sudo and su leave root), from a directory that
/// is not the repository.
fn preflight(vars: &[(&str, &str)]) -> (bool, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/run.sh");
    let out = Command::new("/bin/bash")
        .arg(script)
        .arg("--preflight")
        .env_clear()
        .envs(vars.iter().copied())
        .current_dir("/")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_test_command_finds_rust_as_root_under_sudo_and_without_it() {
    let test = "the_test_command_finds_rust_as_root_under_sudo_and_without_it";
    if !require_root(test) {
        return;
    }
    let Some(cargo_home) = cargo_home() else {
        skip(test, "no cargo in $CARGO_HOME/bin or $HOME/.cargo/bin");
        return;
    };
    let cargo = format!("{cargo_home}/bin/cargo");
    let path = "/usr/sbin:/usr/bin:/sbin:/bin";
    let found = format!("cargo: {cargo} (cargo 1.");
    // su without -, or a CI job: root's own toolchain, off PATH (CARGO_HOME kept if set).
    let home = std::env::var("HOME").unwrap_or_default();
    let mut vars = vec![("PATH", path), ("HOME", home.as_str())];
    if std::env::var_os("CARGO_HOME").is_some() {
        vars.push(("CARGO_HOME", cargo_home.as_str()));
    }
    let (ok, out) = preflight(&vars);
    assert!(ok && out.contains(&found), "as root without sudo: {out}");
    // sudo: root's secure_path and HOME; SUDO_USER names the user whose ~/.cargo has Rust.
    match Path::new(&cargo_home)
        .parent()
        .filter(|_| cargo_home.ends_with("/.cargo"))
        .and_then(|h| {
            let owner = Command::new("stat")
                .arg("-c")
                .arg("%U")
                .arg(h)
                .output()
                .ok()?;
            Some(String::from_utf8_lossy(&owner.stdout).trim().to_string())
        }) {
        Some(owner) => {
            let (ok, out) = preflight(&[
                ("PATH", path),
                ("HOME", "/nonexistent"),
                ("SUDO_USER", &owner),
            ]);
            assert!(ok && out.contains(&found), "under sudo as {owner}: {out}");
        }
        None => {
            println!("{test}: Rust is not under a user's ~/.cargo here; the sudo case needs one")
        }
    }
    // Neither: a clear message, exit 2, nothing installed or run.
    let (ok, out) = preflight(&[("PATH", path), ("HOME", "/nonexistent")]);
    assert!(
        !ok && out.contains("cargo not found: install Rust"),
        "{out}"
    );
}
