//! The monitoring mixin: the rule files and dashboards, checked by promtool and by a real
//! Prometheus scraping the real daemon.

mod live;
mod rules;
