//! sysfs: pure readers and parsers (placeholder).
