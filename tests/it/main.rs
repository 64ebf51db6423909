//! ssdwatch's integration tests, in one binary: a module per area a user would recognise, and
//! `support` with the helpers they share (hung mounts, loop filesystems, the daemon in-process
//! or as its real binary, the fake smartctl). One binary links the crate once, not once a file.
//!
//! Run one area or one test by its path: `cargo test --test it smart::`,
//! `cargo test --test it -- --exact golden::every_fixture_host_matches_its_golden_exposition`.
//! The QEMU suites under `vm::` are `#[ignore]`d; tests/run.sh runs each by its module:
//! `cargo test --test it -- --ignored vm::drives::`.
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod support;

mod backtest;
mod cli;
mod config_bounds;
mod databases;
mod filesystem;
mod fuzz;
mod golden;
mod history;
mod layering;
mod layers;
mod memory;
mod packaging;
mod privsep;
mod probe;
mod prometheus;
mod query;
mod readme;
mod report;
mod run_script;
mod smart;
mod vm;
mod web;
