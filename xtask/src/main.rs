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

/// The shells whose completions the package installs (see Cargo.toml's deb assets).
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Writes the man page of the daemon and one of each visible subcommand into `dir` (created);
/// hidden subcommands (the SMART helper) and flags (test seams) get none.
fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(ssdwatch::cli::command(), dir)?;
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
