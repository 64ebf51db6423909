//! Build-time tasks (the cargo-xtask pattern): the man pages and shell completions the .deb
//! ships, generated from `ssdwatch::cli::command()` so they can't drift from the flags.
//! Nothing here runs on a monitored host; the daemon binary does not link it.
//!
//!   cargo run -p xtask -- man DIR           ssdwatch.1 and ssdwatch-SUBCOMMAND.1
//!   cargo run -p xtask -- completions DIR   ssdwatch.bash, _ssdwatch, ssdwatch.fish
// A build tool run by the packager: a failure is reported and ends it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use clap_complete::Shell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The sections of ssdwatch(1) that clap's definition can't give, in roff.
const DAEMON_SECTIONS: &str = r#".SH SIGNALS
.TP
\fBSIGTERM\fR, \fBSIGINT\fR
Stop: no new connection is taken, the history is flushed, and connections still open at the
shutdown deadline are dropped; the exit status is 0.
.TP
\fBSIGHUP\fR
Read the config file and the web config file again. A file that is not valid leaves the running
config as it was, says why in the log, and sets
\fBssdwatch_config_last_reload_successful\fR to 0 until a good one is read.
.SH "EXIT STATUS"
.TP
\fB0\fR
Stopped by a signal after a clean shutdown, or the command did what it was asked.
.TP
\fB1\fR
A failure while running: the address could not be listened on, a collector failed in
\fBsample\fR, a report could not be read.
.TP
\fB2\fR
A usage or configuration error: an unknown flag, or a config file that can't be read or is not
valid (its file, key and line are named). The packaged unit does not restart on it
(\fBRestartPreventExitStatus=2\fR).
.SH FILES
.TP
\fI/etc/ssdwatch/ssdwatch.yaml\fR
The config file the packaged unit passes with \fB--config.file\fR.
.TP
\fI/var/lib/ssdwatch/\fR
The state directory (\fBstate_dir\fR): the history store and the probes' budgets.
.TP
\fITARGET/.ssdwatch-probe/\fR
Each probe target's own directory: the probe file and run markers; removed on purge.
.TP
\fI/usr/share/ssdwatch/\fR
The Prometheus rules and alerts, the Grafana dashboards and provisioning examples.
"#;

/// The shells whose completions the package installs (see Cargo.toml's deb assets).
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Writes the man page of the daemon and one of each visible subcommand into `dir` (created);
/// hidden subcommands (the SMART helper) and flags (test seams) get none.
fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(ssdwatch::cli::command(), dir)?;
    // What clap knows nothing of: the daemon's signals, exit statuses and files.
    let main_page = dir.join("ssdwatch.1");
    let mut page = std::fs::read_to_string(&main_page)?;
    page.push_str(DAEMON_SECTIONS);
    std::fs::write(&main_page, page)?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    pages.sort();
    Ok(pages)
}

/// Writes the completion script of each of [`SHELLS`] into `dir` (created), named as each
/// shell looks it up.
fn completions(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = ssdwatch::cli::command();
    SHELLS
        .iter()
        .map(|shell| clap_complete::generate_to(*shell, &mut cmd, "ssdwatch", dir))
        .collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, dir) = match args.as_slice() {
        [task, dir] if task == "man" || task == "completions" => (task.as_str(), Path::new(dir)),
        _ => {
            eprintln!("usage: cargo run -p xtask -- man DIR | completions DIR");
            return ExitCode::from(2);
        }
    };
    let written = if task == "man" {
        man_pages(dir)
    } else {
        completions(dir)
    };
    match written {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask {task} {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_man_page_lists_every_flag_and_subcommand_and_no_test_seam() {
        let dir = tempfile::tempdir().unwrap();
        let pages = names(&man_pages(dir.path()).unwrap());
        // roff writes a dash as \-.
        let man = std::fs::read_to_string(dir.path().join("ssdwatch.1"))
            .unwrap()
            .replace("\\-", "-");
        assert!(
            man.starts_with(".ie") && man.contains(".TH ssdwatch 1"),
            "{man}"
        );
        let cmd = ssdwatch::cli::command();
        let mut flags = 0;
        for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = a.get_long() {
                assert!(
                    man.contains(&format!("--{long}")),
                    "man page lacks --{long}"
                );
                flags += 1;
            }
        }
        assert!(
            flags >= 13 + 2 * ssdwatch::registry::COLLECTORS.len(),
            "{flags}"
        );
        // What clap can't give: signals, exit statuses, files; after the generated sections.
        for section in [".SH SIGNALS", ".SH \"EXIT STATUS\"", ".SH FILES"] {
            assert!(man.contains(section), "man page lacks {section}");
        }
        assert!(man.find(".SH SIGNALS") > man.find(".SH OPTIONS"), "{man}");
        for word in [
            "SIGHUP",
            "SIGTERM",
            "RestartPreventExitStatus=2",
            "/etc/ssdwatch/ssdwatch.yaml",
            "/var/lib/ssdwatch/",
        ] {
            assert!(man.contains(word), "man page lacks {word}");
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(
                man.contains(&format!("ssdwatch-{}", sub.get_name())),
                "man page lacks {}",
                sub.get_name()
            );
        }
        // The conventional name, and the old one the page tells of.
        assert!(
            man.contains("--config.file") && man.contains("`--config` is the same flag"),
            "{man}"
        );
        // The example config is named where an installed system has it, not by a path of the
        // source tree that a reader of the man page doesn't have.
        assert!(
            man.contains("Every key with its default and a comment:")
                && !man.contains("config/ssdwatch.example.yaml"),
            "{man}"
        );
        assert!(
            !man.contains("fixture."),
            "test seams stay out of the man page"
        );
        // The pages the SUBCOMMANDS section refers to exist too; the helper has none.
        for want in [
            "ssdwatch.1",
            "ssdwatch-serve.1",
            "ssdwatch-sample.1",
            "ssdwatch-smart-inspect.1",
            "ssdwatch-probe-run.1",
        ] {
            assert!(pages.iter().any(|p| p == want), "{want} not in {pages:?}");
        }
        assert!(!pages.iter().any(|p| p.contains("helper")), "{pages:?}");
        let run = std::fs::read_to_string(dir.path().join("ssdwatch-probe-run.1")).unwrap();
        assert!(run.replace("\\-", "-").contains("--target"), "{run}");
    }

    #[test]
    fn completions_for_bash_zsh_and_fish_know_the_collector_flags() {
        let dir = tempfile::tempdir().unwrap();
        let files = completions(dir.path()).unwrap();
        assert_eq!(
            names(&files),
            ["ssdwatch.bash", "_ssdwatch", "ssdwatch.fish"]
        );
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            assert!(
                text.contains("no-collector.smart") && text.contains("probe"),
                "{}: {text}",
                f.display()
            );
        }
    }
}
