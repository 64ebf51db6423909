//! Helpers for the crate's unit tests; the integration tests take this file as their own too
//! (tests/it/support/mod.rs), so a skip means the same in both. A skip goes through `skip`,
//! which the test script's strict mode (`SSDWATCH_TESTS_STRICT`, set when it runs as root with
//! every package installed) turns into a failure.

/// Says why a test is skipped and returns false; panics instead under strict mode, so a suite
/// that was meant to run everything can't pass by skipping.
pub(crate) fn skip(test: &str, why: &str) -> bool {
    if std::env::var_os("SSDWATCH_TESTS_STRICT").is_some_and(|v| !v.is_empty()) {
        panic!("{test}: {why}, and SSDWATCH_TESTS_STRICT is set: nothing may be skipped");
    }
    use std::io::Write;
    // Straight to stderr: the harness captures println!/eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
    false
}
