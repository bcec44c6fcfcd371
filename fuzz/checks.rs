//! What each fuzz target does with one input, shared by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/*.rs`) and by `tests/fuzz_corpus.rs`, which replays every committed corpus
//! file through the same functions in a normal `cargo test`.
//!
//! Each function must never panic on any input; the assertions in it are the properties a run
//! checks besides "no panic".

#![allow(dead_code)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use sluice::mcp::headers::{decode, decode_str, encode};
use sluice::mcp::jsonrpc::Envelope;
use sluice::state::{Key, Keys, Sealed};

/// `envelope`: the input is a request body, then optionally a NUL byte and request header lines
/// (`name: value`, one per line). Parses the body once, reads `_meta`, checks the mirrored
/// headers (standard and `Mcp-Param-*` against fixed annotations), the version and the method.
/// Property: re-serialising an envelope with every member untouched parses back to the same
/// id, method and members.
pub(crate) fn envelope(data: &[u8]) {
    let (body, head) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(env) = Envelope::parse(Bytes::copy_from_slice(body)) else {
        return;
    };
    let again = Envelope::parse(env.rewrite_params(|_, _| None))
        .expect("an envelope written back from its own members parses");
    assert_eq!(again.method, env.method);
    assert_eq!(again.id_json(), env.id_json());
    assert_eq!(again.has_params(), env.has_params());
    assert!(
        again.members().eq(env.members()),
        "members changed when written back"
    );
    let headers = header_map(head);
    for member in ["name", "uri", "arguments"] {
        let _ = env.param_str(member);
    }
    match sluice::validate::meta::read(&env) {
        Ok(meta) => {
            let _ =
                sluice::validate::headers::check(&headers, &env, &meta).map_err(|e| e.to_string());
            let _ = sluice::validate::check_version(&meta).map_err(|e| e.to_string());
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let _ = sluice::validate::check_method(&env.method, |cap| cap != "completions");
    let _ = sluice::route::xheader::check(&headers, env.param("arguments"), &annotations());
}

fn annotations() -> Vec<sluice::route::xheader::ParamHeader> {
    let schema = serde_json::json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry"}}}
    }});
    sluice::route::xheader::annotations(&schema).expect("the fixed annotations are valid")
}

/// Header lines `name: value` (invalid names or values are skipped).
pub(crate) fn header_map(head: &[u8]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            h.append(n, v);
        }
    }
    h
}

/// `header_value`: the input is a raw header value. Decoding never panics; a decoded value
/// encodes to a valid header value that decodes back to it; any UTF-8 text encodes and decodes
/// back to itself.
pub(crate) fn header_value(data: &[u8]) {
    if let Ok(v) = HeaderValue::from_bytes(data) {
        let a = decode(&v);
        if let Ok(text) = v.to_str() {
            assert_eq!(a, decode_str(text), "decode and decode_str disagree");
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(v) = decode_str(text) {
        let enc = encode(&v);
        let hv = HeaderValue::from_str(&enc).expect("encode gives a valid header value");
        assert_eq!(
            decode(&hv).as_deref(),
            Ok(v.as_ref()),
            "a decoded value did not survive encode + decode"
        );
    }
    let enc = encode(text);
    let hv = HeaderValue::from_str(&enc).expect("encode gives a valid header value");
    assert_eq!(
        decode(&hv).as_deref(),
        Ok(text),
        "text did not survive encode + decode"
    );
}

/// The key every `open_state` input is opened with.
pub(crate) fn state_keys() -> Keys {
    Keys::new(vec![Key::new(7, vec![0x5a; 32]).expect("a 32-byte key")]).expect("one key")
}

/// The valid state the `open_state` edits start from (built from its wire form, so fields added
/// to [`Sealed`] later with a default need no change here).
pub(crate) fn sample_state() -> Sealed {
    serde_json::from_value(serde_json::json!({
        "p": "alice", "m": "tools/call", "n": "x", "d": "d", "u": "u", "r": 1, "e": u64::MAX, "o": "local",
        "h": "h", "k": "modern", "x": "upstream-state"
    }))
    .expect("a valid sealed payload")
}

fn refused(keys: &Keys, token: &str) -> bool {
    keys.open(token, "alice", "tools/call", "x", "d", 5)
        .is_err()
}

/// `open_state`: opening never panics and never accepts what Sluice did not seal. The input is
/// used three ways: as a token (when UTF-8), as the bytes inside a token (Base64url of the input:
/// a version, key id, payload and a forged tag), and as edits on a valid token (each pair of
/// bytes: an operation and a position/character; edits that leave the token unchanged are
/// skipped).
pub(crate) fn open_state(data: &[u8]) {
    let keys = state_keys();
    if let Ok(t) = std::str::from_utf8(data) {
        assert!(refused(&keys, t), "an arbitrary token was accepted: {t:?}");
    }
    assert!(
        refused(&keys, &URL_SAFE_NO_PAD.encode(data)),
        "a forged token was accepted"
    );
    let valid = keys.seal(&sample_state());
    assert!(!refused(&keys, &valid), "the valid state must open");
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.";
    let mut t = valid.clone().into_bytes();
    for pair in data.chunks(2) {
        let (op, arg) = (pair[0], *pair.get(1).unwrap_or(&0) as usize);
        let at = (op as usize >> 2) * 256 + arg;
        match op & 3 {
            0 if !t.is_empty() => {
                let i = at % t.len();
                t[i] = ALPHABET[arg % ALPHABET.len()];
            }
            1 => {
                let i = at % (t.len() + 1);
                t.insert(i, ALPHABET[arg % ALPHABET.len()]);
            }
            2 if !t.is_empty() => {
                let i = at % t.len();
                t.remove(i);
            }
            3 if !t.is_empty() => {
                let i = at % t.len();
                t[i] ^= 1 << (arg % 7);
            }
            _ => {}
        }
    }
    if t != valid.as_bytes() {
        let t = String::from_utf8_lossy(&t);
        assert!(refused(&keys, &t), "an edited state was accepted: {t}");
    }
}

/// `uri_template`: the input is a template, a NUL byte, then a URI (each read as UTF-8, lossily;
/// no NUL: all template, empty URI). Properties: on inputs under 64 bytes the linear matcher
/// agrees with [`reference_matches`] (the recursive matcher it replaced); on any input it takes
/// at most 8 × (len(uri) + 1) × (parts + 1) steps, with parts bounded by 2 × (number of `}`) + 1,
/// so no template shape makes it superlinear in the URI.
pub(crate) fn uri_template(data: &[u8]) {
    let (t, u) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (t, u) = (String::from_utf8_lossy(t), String::from_utf8_lossy(u));
    let (got, steps) = sluice::route::uri::matches_counting(&t, &u);
    assert_eq!(got, sluice::route::uri::matches(&t, &u));
    let parts = 2 * t.bytes().filter(|&b| b == b'}').count() as u64 + 1;
    let bound = 8 * (u.len() as u64 + 1) * (parts + 1);
    assert!(
        steps <= bound,
        "{steps} steps for a {}-byte uri and at most {parts} parts (bound {bound})",
        u.len()
    );
    if data.len() < 64 {
        assert_eq!(got, reference_matches(&t, &u), "template {t:?} uri {u:?}");
    }
}

/// The recursive matcher `route::uri` used before it was made linear, with failed states
/// remembered so inputs of up to 64 bytes stay fast: the reference semantics.
pub(crate) fn reference_matches(template: &str, uri: &str) -> bool {
    fn go<'a>(
        template: &'a str,
        uri: &'a str,
        failed: &mut std::collections::HashSet<(usize, usize)>,
    ) -> bool {
        if failed.contains(&(template.len(), uri.len())) {
            return false;
        }
        let ok = match template.find('{') {
            None => template == uri,
            Some(open) => match template[open..].find('}').map(|c| open + c) {
                None => template == uri,
                Some(close) => {
                    let (lit, var, rest) = (
                        &template[..open],
                        &template[open + 1..close],
                        &template[close + 1..],
                    );
                    match uri.strip_prefix(lit) {
                        None => false,
                        Some(tail) => {
                            let reserved = var.starts_with('+') || var.starts_with('#');
                            (1..=tail.len())
                                .filter(|&i| tail.is_char_boundary(i))
                                .any(|i| {
                                    let (value, after) = tail.split_at(i);
                                    (reserved || !value.contains(['/', '?', '#']))
                                        && go(rest, after, failed)
                                })
                        }
                    }
                }
            },
        };
        if !ok {
            failed.insert((template.len(), uri.len()));
        }
        ok
    }
    go(template, uri, &mut std::collections::HashSet::new())
}

/// The event bound every `sse_reader` input is read with (small, so seeds reach it).
const SSE_MAX: usize = 512;

/// `sse_reader`: the input is an SSE byte stream. It is fed whole, one byte per push, and in
/// two chunkings derived from the input. Properties: every chunking gives the same events, or
/// every one is refused as too large; and the reader examines at most twice the bytes pushed
/// (`Reader::scanned`), so no chunking makes it rescan what it has read.
pub(crate) fn sse_reader(data: &[u8]) {
    let whole = read_chunked(data, std::iter::repeat(data.len().max(1)));
    let bytes = read_chunked(data, std::iter::repeat(1));
    assert_eq!(whole, bytes, "fed whole vs one byte per push");
    let mut seed = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let random = std::iter::from_fn(|| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        Some(1 + (seed >> 59) as usize)
    });
    assert_eq!(
        whole,
        read_chunked(data, random),
        "fed whole vs chunks of 1 to 32 bytes"
    );
    let own = data.iter().map(|&b| 1 + b as usize % 7);
    assert_eq!(
        whole,
        read_chunked(data, own.chain(std::iter::repeat(1))),
        "fed whole vs chunks sized by the input"
    );
}

/// Feeds `data` in chunks of the given sizes; gives the events or the refusal, having checked
/// the reader's work bound.
fn read_chunked(
    data: &[u8],
    sizes: impl Iterator<Item = usize>,
) -> Result<Vec<sluice::mcp::sse::Event>, sluice::mcp::sse::TooLarge> {
    let mut r = sluice::mcp::sse::Reader::new(SSE_MAX);
    let (mut events, mut rest, mut pushed) = (Vec::new(), data, 0u64);
    for size in sizes {
        if rest.is_empty() {
            break;
        }
        let (chunk, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        pushed += chunk.len() as u64;
        let got = r.push(chunk);
        assert!(
            r.scanned() <= 2 * pushed,
            "{} bytes examined for {pushed} pushed",
            r.scanned()
        );
        events.extend(got?);
    }
    Ok(events)
}

/// `digest`: the input is two JSON texts split at the first NUL (the second may be absent).
/// Properties: a text and its reference canonical form always share a digest; two texts share
/// a digest exactly when their reference canonical forms are equal (keys sorted, duplicates in
/// order, strings decoded, numbers by their text, whitespace dropped). The reference is written
/// independently of `sluice::state::digest` (it builds text; the library hashes a tree).
pub(crate) fn digest(data: &[u8]) {
    let (a, b) = match data.iter().position(|&x| x == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let (Ok(a), b) = (std::str::from_utf8(a), b.map(std::str::from_utf8)) else {
        return;
    };
    let da = sluice::state::digest::value_digest(a);
    if let Some(ca) = reference_canonical(a) {
        assert_eq!(
            da,
            sluice::state::digest::value_digest(&ca),
            "a text and its canonical form differ: {a:?} vs {ca:?}"
        );
        if let Some(Ok(b)) = b {
            if let Some(cb) = reference_canonical(b) {
                assert_eq!(
                    ca == cb,
                    da == sluice::state::digest::value_digest(b),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }
}

/// Canonical text of a JSON value, or `None` when it is not JSON (or deeper than 64).
pub(crate) fn reference_canonical(text: &str) -> Option<String> {
    struct P<'a> {
        s: &'a [u8],
        i: usize,
    }
    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            }
        }
        fn value(&mut self, depth: usize) -> Option<String> {
            if depth > 64 {
                return None;
            }
            self.ws();
            let start = self.i;
            match *self.s.get(self.i)? {
                b'{' => {
                    self.i += 1;
                    let mut members: Vec<(String, String)> = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b'}') {
                        self.i += 1;
                    } else {
                        loop {
                            self.ws();
                            let k = self.string()?;
                            self.ws();
                            (self.s.get(self.i) == Some(&b':')).then_some(())?;
                            self.i += 1;
                            let v = self.value(depth + 1)?;
                            members.push((k, v));
                            self.ws();
                            match self.s.get(self.i)? {
                                b',' => self.i += 1,
                                b'}' => {
                                    self.i += 1;
                                    break;
                                }
                                _ => return None,
                            }
                        }
                    }
                    members.sort_by(|x, y| x.0.cmp(&y.0));
                    let body: Vec<String> = members
                        .iter()
                        .map(|(k, v)| serde_json::to_string(k).ok().map(|k| format!("{k}:{v}")))
                        .collect::<Option<_>>()?;
                    Some(format!("{{{}}}", body.join(",")))
                }
                b'[' => {
                    self.i += 1;
                    let mut items = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b']') {
                        self.i += 1;
                    } else {
                        loop {
                            items.push(self.value(depth + 1)?);
                            self.ws();
                            match self.s.get(self.i)? {
                                b',' => self.i += 1,
                                b']' => {
                                    self.i += 1;
                                    break;
                                }
                                _ => return None,
                            }
                        }
                    }
                    Some(format!("[{}]", items.join(",")))
                }
                b'"' => serde_json::to_string(&self.string()?).ok(),
                _ => {
                    while self.i < self.s.len()
                        && !matches!(
                            self.s[self.i],
                            b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'
                        )
                    {
                        self.i += 1;
                    }
                    let tok = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                    let ok = matches!(tok, "true" | "false" | "null")
                        || sluice::mcp::number::Exact::parse(tok).is_some();
                    ok.then(|| tok.to_owned())
                }
            }
        }
        fn string(&mut self) -> Option<String> {
            let rest = std::str::from_utf8(&self.s[self.i..]).ok()?;
            let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
            let s = de.next()?.ok()?;
            self.i += de.byte_offset();
            Some(s)
        }
    }
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}
