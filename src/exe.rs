//! Finding a program as a shell does: a name with a directory in it is taken as it is, a bare
//! name is looked up in each directory of `PATH`, and only an executable regular file counts.

use std::path::{Path, PathBuf};

/// `prog` as a shell would run it, or `None` when no executable file is there.
pub(crate) fn find(prog: &Path) -> Option<PathBuf> {
    if prog.components().count() > 1 {
        return executable(prog).then(|| prog.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(prog))
        .find(|p| executable(p))
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_taken_as_it_is_and_a_name_is_looked_up_executable_only() {
        assert_eq!(find(Path::new("/bin/sh")), Some(PathBuf::from("/bin/sh")));
        assert!(find(Path::new("sh")).is_some_and(|p| p.ends_with("sh") && p.is_absolute()));
        assert_eq!(find(Path::new("/etc/hostname-not-there")), None);
        // A regular file without an execute bit is no program.
        assert_eq!(find(Path::new("/etc/passwd")), None);
        assert_eq!(find(Path::new("no-such-program-anywhere")), None);
    }
}
