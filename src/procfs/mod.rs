//! procfs: pure readers and parsers (placeholder).
