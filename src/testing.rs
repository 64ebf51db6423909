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

/// smartctl 7.3's text dump of a log page (smartmontools' `dStrHex` layout: a space, the
/// address, the bytes from column 8 with one more space after the eighth, their ASCII from
/// column 60, the line cut at 76 characters), as `--json=o` puts it in `smartctl.output`.
pub(crate) fn nvme_log_dump(id: u8, b: &[u8]) -> Vec<String> {
    let mut out = vec![format!("NVMe Log 0x{id:02x} (0x{:04x} bytes)", b.len())];
    for (i, chunk) in b.chunks(16).enumerate() {
        let mut line = format!(" {:02x}", i * 16);
        line.push_str(&" ".repeat(5usize.saturating_sub(line.len())));
        for (k, x) in chunk.iter().enumerate() {
            line.push_str(if k == 8 { "  " } else { " " });
            line.push_str(&format!("{x:02x}"));
        }
        line.push_str(&" ".repeat(60usize.saturating_sub(line.len())));
        line.extend(chunk.iter().map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '.'
            }
        }));
        line.truncate(76);
        out.push(line);
    }
    out
}

/// For a test that measures the whole process (its open files, its memory): other tests of
/// the same binary run on other threads and open, close and allocate meanwhile. Called first
/// in such a test with its full path (`module::tests::name`): in the harness's run it starts
/// this test binary again with only that test on one thread, waits for it, fails if it failed
/// and returns false (the caller returns); in that second run it returns true (the caller
/// measures, alone in its process).
#[allow(dead_code)] // not every test binary that includes this file has such a test
pub(crate) fn alone(test: &str) -> bool {
    const KEY: &str = "SSDWATCH_TEST_ALONE";
    if std::env::var(KEY).is_ok_and(|v| v == test) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(KEY, test)
        .output()
        .expect("start the test binary again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{test} alone failed:\n{text}");
    // The filter matched it: a renamed test must not pass by running nothing.
    assert!(
        text.contains("1 passed"),
        "{test} did not run alone:\n{text}"
    );
    false
}
