//! `ssdwatch report` on stores with a known story: as text and JSON, as a page in a browser, and
//! read back from Prometheus after a backfill.

mod html;
mod prometheus;
mod store;
