//! The privileged wing: what runs with the capabilities the daemon gave up, and the bounded
//! runner of every child process. The helper (`spec`, `client`, `worker`) reads drives and runs
//! dmsetup for the unprivileged daemon; its clients (the SMART and layers collectors) get a
//! [`Helper`] handle at construction. No scheduling, no metrics and no config parsing here;
//! the capabilities themselves and the keeper are `crate::privsep`'s.
//!
//! Layout: `runner` (a child in its own process group, killed at its timeout, its output
//! capped), `escape` (what a run left behind, found and killed), `atasmart` (the libatasmart
//! backend), `access` (why a read was refused), `spec` (what the helper is started with, its
//! wire, its allow rule), `worker` (the helper's loop), `client` (the daemon's side).

pub(crate) mod access;
pub(crate) mod atasmart;
pub(crate) mod client;
pub(crate) mod escape;
pub(crate) mod runner;
pub(crate) mod spec;
pub(crate) mod worker;

pub(crate) use client::{Helper, RequestKind};
pub(crate) use runner::{Exit, MAX_OUTPUT, RunError, RunOutcome, run_bounded};
pub(crate) use spec::{DmQuery, Protocol, Spec};
