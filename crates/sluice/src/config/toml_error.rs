//! A TOML file that does not deserialize, told without the value it refused.
//!
//! Takes the file's text, its name and the `toml` error; gives `FILE:LINE:COLUMN: KEY.PATH: what
//! was wrong`. serde's messages quote the value they refuse (`invalid type: string "…"`, `unknown
//! variant `…``), and a value on the wrong key, of the wrong type, or a key misspelled is as
//! likely a secret as any: each such message keeps its kind and what was expected, the value
//! is left out (the line and column say where it is), and an unknown key is not repeated. The
//! key path is the document's own (table and key names), escaped when it is not plain. Refuses
//! nothing.

/// `FILE:LINE:COLUMN: KEY.PATH: MESSAGE` for `e`, a deserialization error of `text`.
pub(crate) fn describe(text: &str, origin: &str, mut e: toml::de::Error) -> String {
    let (line, column) = e.span().map(|s| position(text, s.start)).unwrap_or((0, 0));
    let message = without_value(e.message());
    // Without its input, the error's Display is the message, then "in `KEY.PATH`" (a quoted
    // key may hold a newline: the path is cut by position, not by line).
    e.set_input(None);
    let shown = e.to_string();
    let path = shown
        .strip_prefix(e.message())
        .and_then(|r| r.strip_prefix("\nin `"))
        .and_then(|r| r.strip_suffix("`\n"))
        .map(plain);
    match path {
        Some(p) if !p.is_empty() => format!("{origin}:{line}:{column}: {p}: {message}"),
        _ => format!("{origin}:{line}:{column}: {message}"),
    }
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// A key path as written when it is plain (letters, digits, `_`, `-`, `.`), else escaped.
fn plain(path: &str) -> String {
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        path.to_owned()
    } else {
        crate::escape::Escaped(&path).to_string()
    }
}

/// serde's message without the value it quotes: `invalid type: string "…", expected a map`
/// becomes `invalid type: a string (not shown), expected a map`.
fn without_value(m: &str) -> String {
    for head in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = m.strip_prefix(head) {
            let (what, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
            // serde's `Unexpected`: `string "…"`, `integer `5``, `floating point `1.5``, `map`…
            let kind = what.split(['`', '"', '\'']).next().unwrap_or("").trim();
            return format!("{head}{kind} (the value is not shown), expected {expected}");
        }
    }
    for (head, what) in [("unknown variant ", "value"), ("unknown field ", "key")] {
        if let Some(rest) = m.strip_prefix(head) {
            let (given, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
            let given = given.trim_matches('`');
            // The nearest expected name is Sluice's own text: said instead of what was written.
            let near = names(expected)
                .filter_map(|n| Some((distance(given, n)?, n)))
                .min();
            return match near {
                Some((d, n)) if d <= 2 => {
                    format!("unknown {what} (not shown), did you mean `{n}`? expected {expected}")
                }
                _ => format!("unknown {what} (not shown), expected {expected}"),
            };
        }
    }
    m.to_owned()
}

/// The names in serde's "one of `a`, `b`" (or "`a` or `b`").
fn names(expected: &str) -> impl Iterator<Item = &str> {
    expected.split('`').skip(1).step_by(2)
}

/// The edit distance of two short names (`None` past 64 characters: no suggestion).
fn distance(a: &str, b: &str) -> Option<usize> {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len() > 64 || b.len() > 64 {
        return None;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (prev + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    Some(row[b.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct File {
        #[serde(default)]
        keys: Vec<String>,
        #[serde(default)]
        era: Option<Era>,
        #[serde(default)]
        headers: std::collections::BTreeMap<String, String>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    enum Era {
        #[serde(rename = "auto")]
        Auto,
    }

    fn refused(text: &str) -> String {
        describe(text, "s.toml", toml::from_str::<File>(text).unwrap_err())
    }

    #[test]
    fn a_refused_value_is_placed_and_explained_but_never_printed() {
        for (text, says) in [
            ("keys = \"T1-secret\"\n", "s.toml:1:8: keys: invalid type: string (the value is not shown), expected a sequence"),
            ("\nera = \"T2\"", "s.toml:2:7: era: unknown value (not shown), expected `auto`"),
            ("era = \"autp\"", "s.toml:1:7: era: unknown value (not shown), did you mean `auto`? expected `auto`"),
            ("T3_misspelled = 1", "s.toml:1:1: unknown key (not shown), expected one of `keys`, `era`, `headers`"),
            ("kyes = []", "s.toml:1:1: unknown key (not shown), did you mean `keys`? expected one of `keys`, `era`, `headers`"),
            (
                "[headers]\nAuthorization = 5\nX = \"T4\"",
                "s.toml:2:17: headers.Authorization: invalid type: integer (the value is not shown), expected a string",
            ),
            (
                "headers = { \"a\\nb\" = 5.5 }",
                "s.toml:1:22: \"headers.a\\nb\": invalid type: floating point (the value is not shown), expected a string",
            ),
            ("keys = [\"T5\" \"T6\"]", "s.toml:1:14: missing comma between array elements, expected `,`"),
        ] {
            let got = refused(text);
            assert_eq!(got, says, "{text}");
            assert!(!["T1", "T2", "T3", "T4", "T5", "T6"].iter().any(|t| got.contains(t)), "{got}");
        }
    }
}
