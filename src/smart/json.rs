//! Lenient readers of a smartctl JSON tree: a missing key or a value of the wrong shape is
//! `None`, never an error, so one odd field costs that field only.

use serde_json::Value;

pub(super) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

pub(super) fn get_u64(v: &Value, path: &[&str]) -> Option<u64> {
    get(v, path).and_then(as_u64)
}

/// A non-negative integer; smartctl prints some 128-bit NVMe counters as floats or strings
/// when they overflow 64 bits, which are accepted when integral and in range.
pub(super) fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn get_str(v: &Value, path: &[&str]) -> Option<String> {
    get(v, path)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A temperature in °C when it is a plausible reading.
pub(super) fn celsius(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
        .filter(|t| (-60.0..=200.0).contains(t))
}

/// `n * scale`, or `None` with a warning when that overflows 64 bits.
pub(super) fn mul(n: u64, scale: u64, warnings: &mut Vec<String>) -> Option<u64> {
    let r = n.checked_mul(scale);
    if r.is_none() {
        warnings.push(format!("counter {n} x {scale} overflows 64 bits: dropped"));
    }
    r
}

/// `n` when it is at most `max`, else `None` with a warning naming the field: a value past
/// what the field can hold or a drive can reach is a bad read, not a figure.
pub(super) fn at_most(
    n: Option<u64>,
    max: u64,
    field: &str,
    warnings: &mut Vec<String>,
) -> Option<u64> {
    let n = n?;
    if n > max {
        warnings.push(format!("{field} {n} is implausible (over {max}): dropped"));
        return None;
    }
    Some(n)
}

/// A drive temperature limit in °C: 0 (and anything outside 1..=150) means none was set.
pub(super) fn limit_celsius(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
        .filter(|t| (1.0..=150.0).contains(t))
}
