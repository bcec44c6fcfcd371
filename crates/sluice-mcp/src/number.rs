//! JSON numbers read exactly, from their text.
//!
//! Takes the text of one JSON number (as the one parse left it, untouched); gives its exact
//! value in a canonical form (sign, significant digits, power of ten), so `42`, `42.0` and
//! `4.2e1` are equal and `9007199254740993` is not `9007199254740992`. Refuses (returns `None`)
//! text that is not a JSON number. Work is linear in the text; no value is ever expanded, so
//! `1e999999999` costs what its eleven bytes cost.

/// A JSON number's exact value: `digits × 10^exp`, negated when `neg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exact {
    /// Negative (never set for zero).
    neg: bool,
    /// Significant digits without leading or trailing zeros (empty for zero).
    digits: Vec<u8>,
    /// The power of ten the digits are scaled by (saturating for absurd exponents).
    exp: i64,
}

impl Exact {
    /// Reads JSON number text (RFC 8259 grammar, nothing around it).
    pub fn parse(text: &str) -> Option<Exact> {
        let b = text.as_bytes();
        let mut i = 0;
        let neg = b.first() == Some(&b'-');
        if neg {
            i += 1;
        }
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int = &b[int_start..i];
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        let mut frac: &[u8] = &[];
        if b.get(i) == Some(&b'.') {
            let s = i + 1;
            i = s;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            frac = &b[s..i];
            if frac.is_empty() {
                return None;
            }
        }
        let mut exp: i64 = 0;
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            let eneg = match b.get(i) {
                Some(b'-') => {
                    i += 1;
                    true
                }
                Some(b'+') => {
                    i += 1;
                    false
                }
                _ => false,
            };
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                // Saturates far beyond any exponent that could matter (values stay exact in
                // their digits; only the comparison of absurd scales is coarse, and both sides
                // saturate alike).
                exp = exp
                    .saturating_mul(10)
                    .saturating_add(i64::from(b[i] - b'0'))
                    .min(1 << 60);
                i += 1;
            }
            if i == s {
                return None;
            }
            if eneg {
                exp = -exp;
            }
        }
        if i != b.len() {
            return None;
        }
        let mut digits: Vec<u8> = int.iter().chain(frac).copied().collect();
        exp = exp.saturating_sub(frac.len() as i64);
        let lead = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..lead);
        let trail = digits.iter().rev().take_while(|&&d| d == b'0').count();
        digits.truncate(digits.len() - trail);
        exp = exp.saturating_add(trail as i64);
        if digits.is_empty() {
            return Some(Exact {
                neg: false,
                digits,
                exp: 0,
            });
        }
        Some(Exact { neg, digits, exp })
    }

    /// Whether the value is a whole number (`1e3` and `1000.0` are; `1.5` is not).
    pub fn is_integer(&self) -> bool {
        self.digits.is_empty() || self.exp >= 0
    }

    /// The value as a non-negative integer, saturating at `u64::MAX`; `None` for a negative or
    /// fractional value.
    pub fn as_count(&self) -> Option<u64> {
        if !self.is_integer() || self.neg {
            return None;
        }
        if self.digits.is_empty() {
            return Some(0);
        }
        let width = self.digits.len() as i64 + self.exp;
        if width > 20 {
            return Some(u64::MAX);
        }
        let mut v: u128 = 0;
        for d in &self.digits {
            v = v * 10 + u128::from(d - b'0');
        }
        for _ in 0..self.exp {
            v *= 10;
        }
        Some(u64::try_from(v).unwrap_or(u64::MAX))
    }
}

impl Exact {
    /// The decimal text of an integer value (`-12000` for `-1.2e4`); a fraction keeps its
    /// canonical `digits` and `e` form.
    pub fn to_decimal(&self) -> String {
        if self.digits.is_empty() {
            return "0".into();
        }
        let mut out = String::with_capacity(self.digits.len() + 2);
        if self.neg {
            out.push('-');
        }
        out.extend(self.digits.iter().map(|&d| d as char));
        if self.exp > 0 && self.exp <= 64 {
            out.extend(std::iter::repeat_n('0', self.exp as usize));
        } else if self.exp != 0 {
            out.push_str(&format!("e{}", self.exp));
        }
        out
    }
}

/// Reads a header's decimal integer (`-?[0-9]+`, as `Mcp-Param-*` carries integers).
pub fn decimal_integer(text: &str) -> Option<Exact> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Leading zeros are allowed in a header's decimal; the JSON grammar is not.
    let trimmed = digits.trim_start_matches('0');
    let canonical = if trimmed.is_empty() {
        "0".to_owned()
    } else {
        format!("{}{trimmed}", if text.starts_with('-') { "-" } else { "" })
    };
    Exact::parse(&canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(t: &str) -> Exact {
        Exact::parse(t).unwrap_or_else(|| panic!("{t} is a JSON number"))
    }

    #[test]
    fn spellings_of_one_value_are_equal_and_neighbours_are_not() {
        assert_eq!(e("42"), e("42.0"));
        assert_eq!(e("42"), e("4.2e1"));
        assert_eq!(e("42"), e("420E-1"));
        assert_eq!(e("0"), e("-0.0e5"));
        assert_ne!(e("9007199254740993"), e("9007199254740992"));
        assert_ne!(e("18446744073709551616"), e("18446744073709552616"));
        assert_ne!(e("1"), e("-1"));
    }

    #[test]
    fn counts_are_exact_saturating_and_refuse_fractions_and_negatives() {
        assert_eq!(e("1e6").as_count(), Some(1_000_000));
        assert_eq!(e("1000000.0").as_count(), Some(1_000_000));
        assert_eq!(e("10e5").as_count(), Some(1_000_000));
        assert_eq!(e("1e400").as_count(), Some(u64::MAX));
        assert_eq!(e("18446744073709551616").as_count(), Some(u64::MAX));
        assert_eq!(e("18446744073709551615").as_count(), Some(u64::MAX));
        assert_eq!(e("18446744073709551614").as_count(), Some(u64::MAX - 1));
        assert_eq!(e("1.5").as_count(), None);
        assert_eq!(e("-1").as_count(), None);
        assert_eq!(e("-0").as_count(), Some(0));
        assert_eq!(e("1e-1").as_count(), None);
        assert_eq!(e("1e999999999999999999999999").as_count(), Some(u64::MAX));
    }

    #[test]
    fn only_json_number_text_is_read() {
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "1e+", "+1", "0x10", "1 ", "NaN", "\"1\"",
        ] {
            assert!(Exact::parse(bad).is_none(), "{bad:?}");
        }
        assert_eq!(decimal_integer("042"), Some(e("42")));
        assert_eq!(decimal_integer("-7"), Some(e("-7")));
        for bad in ["1e2", "4.0", "", "-", "+3", " 3"] {
            assert!(decimal_integer(bad).is_none(), "{bad:?}");
        }
    }
}
