//! The digest of a request's params that sealed state binds: a function of the request's exact
//! tokens, so a state issued for one request is refused for any other.
//!
//! Takes the top-level `params` members as raw JSON text (as the one parse left them); gives a
//! hex SHA-256 over a canonical form:
//!
//! - every member but `_meta`, `inputResponses` and `requestState`, sorted by key;
//! - each value hashed as a tree (a Merkle digest): objects by their members sorted by decoded
//!   key (members with the same key keep their order), arrays in order, strings by their decoded
//!   characters, numbers **by their text** (`1` and `1.0`, `2^64` and `2^64 + 1000` differ), and
//!   `true`, `false`, `null` as written;
//! - whitespace, member order and string escapes do not count.
//!
//! Work is linear in the text (each value is read once; a parent hashes its children's 32-byte
//! digests). Refuses nothing: text that is not JSON, or nested past [`MAX_DEPTH`], is hashed as
//! its raw bytes under a tag of its own, so it can only ever equal exactly the same bytes.

use sha2::{Digest, Sha256};

/// Nesting the canonical walk follows (request bodies are bounded far below it at the edge).
pub const MAX_DEPTH: usize = 256;

const VERSION: &[u8] = b"sluice/params/v2\0";

/// The digest (hex) of the canonical params of a request.
pub fn params_digest<'a>(members: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut kept: Vec<(&str, &str)> = members
        .filter(|(k, _)| !matches!(*k, "_meta" | "inputResponses" | "requestState"))
        .collect();
    kept.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    h.update(VERSION);
    h.update((kept.len() as u64).to_be_bytes());
    for (k, raw) in kept {
        put_str(&mut h, k.as_bytes());
        h.update(value_digest(raw));
    }
    super::hex(&h.finalize())
}

/// The canonical digest of one JSON value's text.
pub fn value_digest(raw: &str) -> [u8; 32] {
    let mut p = Walk {
        b: raw.as_bytes(),
        i: 0,
    };
    match p.value(0) {
        Some(d) if p.end() => d,
        _ => {
            let mut h = Sha256::new();
            h.update(b"raw\0");
            h.update(raw.as_bytes());
            h.finalize().into()
        }
    }
}

fn put_str(h: &mut Sha256, s: &[u8]) {
    h.update((s.len() as u64).to_be_bytes());
    h.update(s);
}

fn leaf(tag: &[u8], bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(tag);
    put_str(&mut h, bytes);
    h.finalize().into()
}

/// A one-pass reader of JSON text that gives each value's canonical digest.
struct Walk<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Walk<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn end(&mut self) -> bool {
        self.ws();
        self.i == self.b.len()
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<[u8; 32]> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match *self.b.get(self.i)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => Some(leaf(b"s", self.string()?.as_bytes())),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<[u8; 32]> {
        if !self.b[self.i..].starts_with(word) {
            return None;
        }
        self.i += word.len();
        Some(leaf(b"l", word))
    }

    fn number(&mut self) -> Option<[u8; 32]> {
        let start = self.i;
        while matches!(
            self.b.get(self.i),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.i += 1;
        }
        let text = &self.b[start..self.i];
        // Validated here too: the digest must never equate two texts that are not one number.
        crate::mcp::number::Exact::parse(std::str::from_utf8(text).ok()?)?;
        Some(leaf(b"n", text))
    }

    /// A string token, decoded (escapes resolved), the cursor on its opening quote.
    fn string(&mut self) -> Option<std::borrow::Cow<'a, str>> {
        let start = self.i;
        let mut j = start + 1;
        let mut escaped = false;
        let end = loop {
            let k = memchr::memchr2(b'"', b'\\', &self.b[j.min(self.b.len())..])?;
            if self.b[j + k] == b'\\' {
                escaped = true;
                j += k + 2;
            } else {
                break j + k;
            }
        };
        self.i = end + 1;
        let b: &'a [u8] = self.b;
        let token = &b[start..=end];
        if escaped {
            serde_json::from_slice::<String>(token)
                .ok()
                .map(std::borrow::Cow::Owned)
        } else {
            std::str::from_utf8(&token[1..token.len() - 1])
                .ok()
                .map(std::borrow::Cow::Borrowed)
        }
    }

    fn object(&mut self, depth: usize) -> Option<[u8; 32]> {
        self.i += 1;
        let mut members: Vec<(String, [u8; 32])> = Vec::new();
        if !self.eat(b'}') {
            loop {
                self.ws();
                if self.b.get(self.i) != Some(&b'"') {
                    return None;
                }
                let key = self.string()?.into_owned();
                if !self.eat(b':') {
                    return None;
                }
                let v = self.value(depth + 1)?;
                members.push((key, v));
                if self.eat(b'}') {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        // Stable: members that repeat a key keep their order (a reader may take either).
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut h = Sha256::new();
        h.update(b"o");
        h.update((members.len() as u64).to_be_bytes());
        for (k, v) in &members {
            put_str(&mut h, k.as_bytes());
            h.update(v);
        }
        Some(h.finalize().into())
    }

    fn array(&mut self, depth: usize) -> Option<[u8; 32]> {
        self.i += 1;
        let mut h = Sha256::new();
        h.update(b"a");
        let mut n: u64 = 0;
        if !self.eat(b']') {
            loop {
                h.update(self.value(depth + 1)?);
                n += 1;
                if self.eat(b']') {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        h.update(n.to_be_bytes());
        Some(h.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(args: &str) -> String {
        params_digest([("name", "\"t\""), ("arguments", args)].into_iter())
    }

    #[test]
    fn order_whitespace_and_escapes_do_not_count() {
        assert_eq!(
            d(r#"{"a":1,"b":[true,null,"x"]}"#),
            d(" { \"b\" : [ true , null , \"\\u0078\" ] ,\n\"a\" : 1 } ")
        );
        let with_meta = params_digest(
            [
                ("_meta", "{}"),
                ("arguments", "{}"),
                ("name", "\"t\""),
                ("requestState", "\"s\""),
            ]
            .into_iter(),
        );
        assert_eq!(with_meta, d("{}"));
    }

    #[test]
    fn every_token_counts() {
        let pad = |inner: &str| format!("{}{inner}{}", "[".repeat(130), "]".repeat(130));
        let pairs = [
            (
                r#"{"cmd":"list-files"}"#.to_owned(),
                r#"{"cmd":"rm -rf /"}"#.to_owned(),
            ),
            (r#"{"n":1}"#.into(), r#"{"n":1.0}"#.into()),
            (
                r#"{"n":18446744073709551616}"#.into(),
                r#"{"n":18446744073709552616}"#.into(),
            ),
            (r#"{"a":[1,2]}"#.into(), r#"{"a":[2,1]}"#.into()),
            (r#"{"a":[1,[2]]}"#.into(), r#"{"a":[[1],2]}"#.into()),
            (r#"{"a":"1"}"#.into(), r#"{"a":1}"#.into()),
            (r#"{"a":null}"#.into(), r#"{}"#.into()),
            (r#"{"a":1,"a":2}"#.into(), r#"{"a":2,"a":1}"#.into()),
            (r#"{"ab":"c"}"#.into(), r#"{"a":"bc"}"#.into()),
            (
                format!(r#"{{"cmd":"list-files","pad":{}}}"#, pad("0")),
                format!(r#"{{"cmd":"rm -rf /","pad":{}}}"#, pad("0")),
            ),
            (
                format!(r#"{{"pad":{}}}"#, pad("\"staging\"")),
                format!(r#"{{"pad":{}}}"#, pad("\"production\"")),
            ),
        ];
        for (a, b) in &pairs {
            assert_ne!(d(a), d(b), "{a} vs {b}");
        }
        assert_ne!(
            params_digest([("a", "1")].into_iter()),
            params_digest([("b", "1")].into_iter())
        );
    }

    #[test]
    fn text_that_is_not_json_only_equals_itself() {
        assert_ne!(value_digest("{\"a\":1"), value_digest("{\"a\":1}"));
        assert_eq!(value_digest("[1,"), value_digest("[1,"));
        assert_ne!(value_digest("01"), value_digest("1"));
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 5), "]".repeat(MAX_DEPTH + 5));
        let deeper = format!("{}{}", "[".repeat(MAX_DEPTH + 6), "]".repeat(MAX_DEPTH + 6));
        assert_ne!(value_digest(&deep), value_digest(&deeper));
    }
}
