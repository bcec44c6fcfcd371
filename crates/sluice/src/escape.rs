//! Peer-chosen text as a log line may show it.
//!
//! Takes anything displayable that a peer wrote or that was built from what a peer wrote (an
//! error message quoting an upstream's answer, a header value, an id, a Redis reply); gives it
//! quoted and escaped as Rust's `Debug` escapes a string (`\n`, `\r`, `\t`, `\"`, `\\`,
//! `\u{..}` for every other control or invisible character), at most [`MAX_CHARS`] characters
//! (then `…`), without building the whole text first. So no newline, carriage return, ANSI
//! escape or quote in it can start a forged line or close a field in the text or the JSON log.
//! Refuses nothing. Operator-configured values (upstream names, paths from the config) are
//! logged as they are; this is for what came over a wire. Also gives [`line_safe`], what every
//! log and audit writer passes its output through: the characters that break or reorder a
//! line in some reader although JSON and the text log leave them as they are (C1 controls with
//! NEL, the line and paragraph separators, bidirectional controls) written as `\uXXXX`; and [`shown_var`]: the name of
//! an environment variable that is not set, as an error may print it (a token pasted where its
//! variable's name belongs is not).

use std::fmt::{self, Display, Write as _};

/// The most characters of peer text a log field shows.
pub const MAX_CHARS: usize = 256;

/// `T`'s text, escaped and bounded (see the module head). Log it with `%`: `reason = %Escaped(&why)`.
pub struct Escaped<T>(pub T);

impl<T: Display> Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        let mut w = Writer {
            out: f,
            left: MAX_CHARS,
            cut: false,
        };
        // A `Cut` error only says the bound was reached; anything else is the formatter's.
        let r = write!(w, "{}", self.0);
        let cut = w.cut;
        if r.is_err() && !cut {
            return r;
        }
        if cut {
            f.write_char('…')?;
        }
        f.write_char('"')
    }
}

impl<T: Display> fmt::Debug for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self, f)
    }
}

/// Escapes as it writes, and stops (with an error `Escaped` recognises) at the bound.
struct Writer<'a, 'b> {
    out: &'a mut fmt::Formatter<'b>,
    left: usize,
    cut: bool,
}

impl fmt::Write for Writer<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if self.left == 0 {
                self.cut = true;
                return Err(fmt::Error);
            }
            self.left -= 1;
            match c {
                // A quote inside the quoted text is escaped; an apostrophe needs nothing.
                '\'' => self.out.write_char(c)?,
                c => {
                    for e in c.escape_debug() {
                        self.out.write_char(e)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether `c` breaks or reorders a line in some reader (a log viewer, a terminal, JavaScript)
/// although JSON and Rust's formatting write it as it is: a C1 control (U+0080 to U+009F, NEL
/// among them), the line and paragraph separators U+2028 and U+2029, a bidirectional control
/// (U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069).
pub fn breaks_lines(c: char) -> bool {
    matches!(c, '\u{80}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that [`breaks_lines`] written `\uXXXX`: a JSON escape, so a JSON
/// record stays the same JSON (its strings decode to the same text), and a text line stays one
/// line in every reader. Borrowed when there is none (plain ASCII is never copied).
pub fn line_safe(text: &str) -> std::borrow::Cow<'_, str> {
    // Every such character is past U+007F: ASCII text (the common case) is checked a word at
    // a time.
    if text.is_ascii() || !text.chars().any(breaks_lines) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if breaks_lines(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// A value a peer chose (a URL in its metadata, an issuer) as an error prints it: quoted with
/// Rust's escapes (no control character gets through), at most `max` characters of it, and
/// [`line_safe`].
pub fn shown(text: &str, max: usize) -> String {
    let cut: String = text.chars().take(max).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", line_safe(&format!("{cut:?}")))
}

/// An environment variable's name as an error prints it: as written when it is one by
/// convention (`[A-Z_][A-Z0-9_]*`, at most 128), else not at all (a token pasted where its
/// variable's name belongs must not be printed back).
pub fn shown_var(name: &str) -> String {
    let conventional = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if conventional {
        name.to_owned()
    } else {
        "(a name that is not an UPPER_CASE variable name, not shown)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_name_is_shown_only_when_it_is_one_by_convention() {
        assert_eq!(shown_var("GITHUB_TOKEN"), "GITHUB_TOKEN");
        for pasted in ["ghp_T0k3n", "sk-live-abc", "1ABC", "", "A B"] {
            assert!(
                !shown_var(pasted).contains(pasted) || pasted.is_empty(),
                "{pasted}"
            );
        }
    }

    #[test]
    fn peer_text_is_quoted_escaped_and_bounded() {
        let forged = "sluice-r9\n2026-01-01T00:00:00Z ERROR sluice: principal=admin granted root\r\u{1b}[2K\"x\\";
        let shown = Escaped(forged).to_string();
        assert_eq!(
            shown,
            r#""sluice-r9\n2026-01-01T00:00:00Z ERROR sluice: principal=admin granted root\r\u{1b}[2K\"x\\""#
        );
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(Escaped("it's").to_string(), "\"it's\"");
        let long = Escaped("é".repeat(1000)).to_string();
        assert_eq!(
            long.chars().count(),
            MAX_CHARS + 3,
            "the bound, the quotes and the ellipsis"
        );
        assert!(long.ends_with("…\""));
        assert_eq!(format!("{:?}", Escaped(42)), "\"42\"");
        assert_eq!(
            Escaped("\u{2028}").to_string(),
            "\"\\u{2028}\"",
            "a line separator is escaped too"
        );
        for c in [
            '\u{85}', '\u{2029}', '\u{202e}', '\u{2066}', '\u{200f}', '\u{9b}',
        ] {
            assert!(
                !Escaped(format!("a{c}b")).to_string().contains(c),
                "{:?}",
                c as u32
            );
        }
    }

    #[test]
    fn line_breaking_characters_are_written_as_json_escapes() {
        let text = "{\"name\":\"a\u{2028}b\u{2029}c\u{85}d\u{202e}e\u{2066}f\u{9b}g é ✓\"}";
        let safe = line_safe(text);
        assert_eq!(
            safe,
            "{\"name\":\"a\\u2028b\\u2029c\\u0085d\\u202ee\\u2066f\\u009bg é ✓\"}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).expect("still JSON");
        assert_eq!(
            back["name"], "a\u{2028}b\u{2029}c\u{85}d\u{202e}e\u{2066}f\u{9b}g é ✓",
            "the same text"
        );
        assert!(matches!(
            line_safe("plain é ✓"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
