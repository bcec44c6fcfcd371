//! Peer-chosen text as a log line may show it.
//!
//! Takes anything displayable that a peer wrote or that was built from what a peer wrote (an
//! error message quoting an upstream's answer, a header value, an id, a Redis reply); gives it
//! quoted and escaped as Rust's `Debug` escapes a string (`\n`, `\r`, `\t`, `\"`, `\\`,
//! `\u{..}` for every other control or invisible character), at most [`MAX_CHARS`] characters
//! (then `…`), without building the whole text first. So no newline, carriage return, ANSI
//! escape or quote in it can start a forged line or close a field in the text or the JSON log.
//! Refuses nothing. Operator-configured values (upstream names, paths from the config) are
//! logged as they are; this is for what came over a wire.

use std::fmt::{self, Display, Write as _};

/// The most characters of peer text a log field shows.
pub const MAX_CHARS: usize = 256;

/// `T`'s text, escaped and bounded (see the module head). Log it with `%`: `reason = %Escaped(&why)`.
pub struct Escaped<T>(pub T);

impl<T: Display> Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        let mut w = Writer { out: f, left: MAX_CHARS, cut: false };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_text_is_quoted_escaped_and_bounded() {
        let forged = "sluice-r9\n2026-01-01T00:00:00Z ERROR sluice: principal=admin granted root\r\u{1b}[2K\"x\\";
        let shown = Escaped(forged).to_string();
        assert_eq!(shown, r#""sluice-r9\n2026-01-01T00:00:00Z ERROR sluice: principal=admin granted root\r\u{1b}[2K\"x\\""#);
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(Escaped("it's").to_string(), "\"it's\"");
        let long = Escaped("é".repeat(1000)).to_string();
        assert_eq!(long.chars().count(), MAX_CHARS + 3, "the bound, the quotes and the ellipsis");
        assert!(long.ends_with("…\""));
        assert_eq!(format!("{:?}", Escaped(42)), "\"42\"");
        assert_eq!(Escaped("\u{2028}").to_string(), "\"\\u{2028}\"", "a line separator is escaped too");
    }
}
