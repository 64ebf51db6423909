//! Bounds a YAML text's nesting before the parser sees it: serde_yaml_ng's parser takes time
//! quadratic in the depth (a 200 KB `[[[…` took 31 s of CPU), and no config nests past a few
//! levels. A cheap conservative scan, never a second parser: it may count a bracket inside a
//! plain scalar as nesting, which only matters past [`MAX_DEPTH`].

/// Deeper than any config ssdwatch reads (they nest about 5 levels): refused unparsed.
pub(crate) const MAX_DEPTH: usize = 64;

/// A text nested deeper than [`MAX_DEPTH`], at this 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: nested deeper than {MAX_DEPTH} levels; not a config file")]
pub(crate) struct TooDeep {
    pub line: usize,
}

/// Checks that no line of `text` sits deeper than [`MAX_DEPTH`] levels: its block indentation
/// levels, the `- ` entries that open on it, and the flow collections (`[`, `{`) open on it,
/// outside quotes and comments. Linear in the text.
pub(crate) fn check_depth(text: &str) -> Result<(), TooDeep> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let too_deep = || TooDeep { line: n + 1 };
        let body = line.trim_start_matches(' ');
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let mut depth = 0;
        if flow == 0 {
            let indent = line.len() - body.len();
            while indents.last().is_some_and(|&i| i > indent) {
                indents.pop();
            }
            if indents.last().is_none_or(|&i| i < indent) {
                indents.push(indent);
            }
            depth = indents.len();
            // `- - - x` opens a sequence per dash on one line.
            let mut rest = body;
            while let Some(r) = rest
                .strip_prefix('-')
                .filter(|r| r.is_empty() || r.starts_with([' ', '\t']))
            {
                depth += 1;
                rest = r.trim_start_matches([' ', '\t']);
                if depth > MAX_DEPTH {
                    return Err(too_deep());
                }
            }
        }
        let mut quote: Option<char> = None;
        let mut prev = ' ';
        for c in body.chars() {
            match quote {
                Some(q) => {
                    if c == q {
                        quote = None;
                    }
                }
                None => match c {
                    '#' if prev == ' ' || prev == '\t' => break,
                    '\'' | '"' if matches!(prev, ' ' | '\t' | '[' | '{' | ',' | ':') => {
                        quote = Some(c)
                    }
                    '[' | '{' => {
                        flow += 1;
                        if depth + flow > MAX_DEPTH {
                            return Err(too_deep());
                        }
                    }
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            prev = c;
        }
        if depth + flow > MAX_DEPTH {
            return Err(too_deep());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_config_and_ordinary_shapes_pass() {
        let example = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ssdwatch.example.yaml"),
        )
        .unwrap();
        assert_eq!(check_depth(&example), Ok(()));
        assert_eq!(
            check_depth("a:\n  b:\n    - c: [1, {d: '[[[['}]\n      e: \"{{{\" # [[[\n"),
            Ok(())
        );
    }

    #[test]
    fn deep_flow_sequences_are_refused_at_their_line_without_parsing() {
        let deep = format!("x: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(check_depth(&deep), Err(TooDeep { line: 1 }));
        let multi = format!("a: 1\nx:\n{}", "[\n".repeat(MAX_DEPTH + 1));
        let err = check_depth(&multi).unwrap_err();
        assert!((MAX_DEPTH..=MAX_DEPTH + 3).contains(&err.line), "{err}");
        let maps = format!("x: {}", "{a: ".repeat(500_000));
        assert!(check_depth(&maps).is_err());
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        let dashes = format!("x:\n  {}y\n", "- ".repeat(500_000));
        assert_eq!(check_depth(&dashes), Err(TooDeep { line: 2 }));
        let mut indented = String::new();
        for i in 0..(MAX_DEPTH + 2) {
            indented.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        assert!(check_depth(&indented).is_err());
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count() {
        let quoted = format!(
            "x: '{}'\ny: \"{}\"\n# {}\n",
            "[".repeat(1000),
            "{".repeat(1000),
            "[".repeat(1000)
        );
        assert_eq!(check_depth(&quoted), Ok(()));
    }
}
