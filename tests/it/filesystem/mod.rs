//! Filesystems on the real kernel (root): a hung mount, a real fstrim on a loop device, a mount
//! point that is not UTF-8.

mod loop_fstrim;
mod nonutf8_mount;
mod stuck;
mod task_limit;
