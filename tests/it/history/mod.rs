//! The history store: kept by the running daemon, killed mid-write, upgraded from an older schema.

mod crash;
mod daemon;
mod migrate;
