//! End to end in QEMU guests (opt-in, `#[ignore]`d): emulated drives of every kind, the .deb
//! under systemd, and the degradation story on the simulated SSD. tests/run.sh runs each module
//! on its own: `cargo test --test it -- --ignored vm::drives::` (likewise
//! `vm::systemd::`, `vm::degrade::`, `vm::layers::`).

mod degrade;
mod drives;
mod layers;
mod systemd;
