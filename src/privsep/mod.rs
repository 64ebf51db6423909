//! Least privilege: the capabilities a process holds, giving them up, and the keeper that holds
//! the SMART capabilities for the helper processes. Knows nothing of SMART, HTTP or the config.
//!
//! The split (docs/threat-model.md): the daemon (the process that parses HTTP) starts the keeper
//! while it still holds CAP_SYS_RAWIO and CAP_SYS_ADMIN, then gives up every capability before
//! it binds a port or starts a collector. The keeper reads nothing from anyone: it only starts
//! a worker (the privileged helper) with a fresh socket, hands the daemon its end, and starts another
//! worker with backoff when one dies.

pub mod caps;
pub mod keeper;

pub use caps::{CapState, SMART_CAPS};
