//! Helpers for the crate's unit tests. A skip goes through `skip`, which the test script's strict
//! mode (`SSDWATCH_TESTS_STRICT`, set when it runs as root with every package installed) turns
//! into a failure, as tests/support does for the integration tests.

/// Says why a test is skipped and returns false; panics instead under strict mode.
pub fn skip(test: &str, why: &str) -> bool {
    if std::env::var_os("SSDWATCH_TESTS_STRICT").is_some_and(|v| !v.is_empty()) {
        panic!("{test}: {why}, and SSDWATCH_TESTS_STRICT is set: nothing may be skipped");
    }
    use std::io::Write;
    // Straight to stderr: the harness captures println!/eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
    false
}
