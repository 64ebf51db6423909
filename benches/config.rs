//! How long the config parser takes on 1 MiB texts of hostile shapes (target: each refused or
//! accepted in under 1 s): deep flow and block nesting, long flow lists, many keys, comments,
//! a long string. Prints one line a shape; `cargo test --benches` runs it once as a smoke test.
// Tests and benchmarks: `pub` marks what a module shares inside this crate, and unwrap and
// expect are how a test says "this must hold".
#![allow(unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use ssdwatch::config::{Config, MAX_CONFIG_BYTES};
use std::path::Path;
use std::time::Instant;

fn shapes() -> Vec<(&'static str, String)> {
    let n = MAX_CONFIG_BYTES as usize;
    let fill = |unit: &str, head: &str, tail: &str| {
        let reps = (n - head.len() - tail.len()) / unit.len();
        format!("{head}{}{tail}", unit.repeat(reps))
    };
    vec![
        ("flow sequences 500,000 deep", fill("[", "x: ", "")),
        ("flow maps 250,000 deep", fill("{a: ", "x: ", "")),
        ("block sequences on one line", fill("- ", "x:\n  ", "y\n")),
        (
            "a flow list of 300,000 numbers",
            fill("1, ", "x: [", "1]\n"),
        ),
        ("130,000 unknown keys", fill("kk: 1\n", "", "")),
        ("comments only", fill("# a comment line\n", "", "")),
        ("a long string value", fill("x", "state_dir: /", "\n")),
    ]
}

fn main() {
    let path = Path::new("bench.yaml");
    let mut worst = 0.0f64;
    for (name, text) in shapes() {
        assert!(text.len() as u64 <= MAX_CONFIG_BYTES, "{name}");
        let t = Instant::now();
        let r = Config::parse(&text, path);
        let s = t.elapsed().as_secs_f64();
        worst = worst.max(s);
        let verdict = match r {
            Ok(_) => "accepted".to_string(),
            Err(e) => {
                let e = e.to_string();
                format!("refused: {}", e.chars().take(90).collect::<String>())
            }
        };
        println!("{name:34} {:>8.1} ms  {verdict}", s * 1e3);
    }
    println!("slowest: {:.1} ms (target < 1000 ms)", worst * 1e3);
}
