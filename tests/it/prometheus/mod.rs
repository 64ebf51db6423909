//! The monitoring mixin: the rule files and dashboards, checked by promtool and by a real
//! Prometheus scraping the real daemon (in gzip, as it asks).

mod gzip;
mod live;
mod rules;
