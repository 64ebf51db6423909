//! Readers of /proc under a root path given by the caller (`--path.procfs`), and their pure parsers.

pub mod mountinfo;
pub mod processes;
pub mod selfstat;
pub mod smaps;
