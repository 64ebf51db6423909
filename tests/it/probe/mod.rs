//! The latency probes on real loop-mounted filesystems (root): what the collector reports, the
//! safety gates, and accuracy against fio.

mod accuracy;
mod collector;
mod safety;
