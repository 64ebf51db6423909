//! `ssdwatch history import` from the secured Prometheus.
