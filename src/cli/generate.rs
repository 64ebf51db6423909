//! The man page and shell completions, generated from the clap definition at package build
//! time (`ssdwatch generate man|completions SHELL`), so they can't drift from the flags.

use std::io::Write;

/// The man page (roff) of `cmd`, with its subcommands listed.
pub fn man(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

/// Writes the man page of `cmd` and one of each visible subcommand (`ssdwatch-sample.1`, ...)
/// into `dir`, which is created; 0, or 1 with the error on stderr.
pub fn man_pages(cmd: clap::Command, dir: &std::path::Path) -> i32 {
    match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ssdwatch: generate man --dir {}: {e}", dir.display());
            1
        }
    }
}

/// The completion script of `cmd` for `shell`.
pub fn completions(
    mut cmd: clap::Command,
    shell: clap_complete::Shell,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    Ok(out)
}

/// Writes generated text to stdout; 0, or 1 with the error on stderr.
pub fn write_stdout(text: std::io::Result<Vec<u8>>) -> i32 {
    let written = text.and_then(|t| {
        let mut o = std::io::stdout().lock();
        o.write_all(&t)?;
        o.flush()
    });
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ssdwatch: generate: {e}");
            1
        }
    }
}
