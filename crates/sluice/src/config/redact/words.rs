//! A command line's secrets, found word by word across the whole line.
//!
//! Takes a list of arguments (a stdio `command`, or one config string as a line of one);
//! gives the same arguments, each keeping its shape (its words, separators and quotes), with
//! every secret replaced by `redacted`. The arguments are read as one sequence of words, split at
//! any whitespace (a tab included) inside an argument as between arguments, so a shell string
//! (`sh -c "srv --api-key X"`) is read as the command it runs. A word is secret when it follows:
//! - a secret-named flag (`--token X`, `--pw X`, `-k X`, `-t X`, `-u admin:X`), whatever the
//!   value looks like (`--token --X` too);
//! - a secret-named header name (`Authorization: Bearer X`, `--header=Authorization: Bearer X`),
//!   or a secret-named `NAME=` whose value is an auth scheme (`Authorization=Bearer X`): the
//!   scheme and the credential after it both go;
//!
//! and a part of a word is secret when it is: the value of a secret-named `--flag=V`, `NAME=V`,
//! `NAME:V` (also each `;`, `&` or `,` separated part: `Host=db;Password=X`); the rest of a
//! short secret flag (`-pX`); the password of `user:pw@host` (with or without a scheme, and
//! URLs lose their userinfo, query values and fragment); a word with a well-known token's
//! prefix (`ghp_…`, `sk-…`, `xoxb-…`, a JWT's `eyJ…`); a JSON member's string value whose key is
//! secret-named (`{"apiKey":"X"}`, also with `\"` inside a shell string). Refuses nothing.

use super::{redact_url, secret_name, REDACTED};

/// Short flags that name a secret often enough (`-p` password, `-k` key, `-t` token, `-u`
/// user:password, `-P` password): the next word, or the rest of the word (`-pX`), is redacted.
const SECRET_SHORT_FLAGS: &[char] = &['p', 'k', 't', 'u', 'P'];

/// Words that carry an auth scheme: the word after one is its credential.
const SCHEMES: &[&str] = &["bearer", "basic", "token", "digest", "negotiate", "apikey"];

/// Prefixes of well-known credentials: a word that starts so (and goes on for at least 8 more
/// characters) is one.
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "AKIA",
    "ASIA",
    "eyJ",
    "npm_",
    "pypi-",
    "hf_",
    "AIza",
];

/// The arguments of a command line, each with its secrets redacted.
pub(super) fn redact_line(args: &[&str]) -> Vec<String> {
    let mut pending = 0u8;
    args.iter()
        .map(|arg| {
            let arg = json_pairs(arg);
            let mut out = String::with_capacity(arg.len());
            let mut word = String::new();
            for c in arg.chars() {
                if c.is_whitespace() {
                    out.push_str(&next(&word, &mut pending));
                    word.clear();
                    out.push(c);
                } else {
                    word.push(c);
                }
            }
            out.push_str(&next(&word, &mut pending));
            out
        })
        .collect()
}

/// One word of the line: redacted whole when `pending` says so, else judged by [`word`];
/// `pending` is left saying how many of the following words are secret.
fn next(w: &str, pending: &mut u8) -> String {
    if w.is_empty() {
        return String::new();
    }
    if *pending > 0 {
        *pending -= 1;
        let (lead, core, trail) = quoted(w);
        if SCHEMES.contains(&core.to_ascii_lowercase().as_str()) {
            *pending += 1; // `Bearer X`: the scheme, then its credential
        }
        return format!("{lead}{REDACTED}{trail}");
    }
    let (shown, then) = word(w);
    *pending = then;
    shown
}

/// A word without the quotes and brackets a shell string puts around it.
fn quoted(w: &str) -> (&str, &str, &str) {
    let core = w.trim_start_matches(['\'', '"', '(', '\\', '`']);
    let lead = &w[..w.len() - core.len()];
    let inner = core.trim_end_matches(['\'', '"', ')', ';', '\\', '`', '&', '|']);
    (lead, inner, &core[inner.len()..])
}

/// One word judged alone: what it shows, and how many following words are secret.
fn word(w: &str) -> (String, u8) {
    let (lead, core, trail) = quoted(w);
    let (shown, then) = judge(core);
    (format!("{lead}{shown}{trail}"), then)
}

fn judge(w: &str) -> (String, u8) {
    let dashes = w.len() - w.trim_start_matches('-').len();
    let name = &w[dashes..];
    // `--token`, `-k`: the next word is its value.
    if (1..=2).contains(&dashes)
        && !name.is_empty()
        && !name.contains(['=', ':'])
        && flag_names_secret(name, dashes)
    {
        return (w.to_owned(), 1);
    }
    // `-pX`: a short secret flag with its value attached.
    if dashes == 1
        && name.len() > 1
        && name.starts_with(SECRET_SHORT_FLAGS)
        && !name.contains(['=', ':'])
    {
        return (format!("{}{REDACTED}", &w[..2]), 0);
    }
    if w.contains("://") {
        return (redact_url(w), 0);
    }
    // `Authorization:` (a header's name): its value is the next words.
    if let Some(n) = w.strip_suffix(':') {
        if header_name(n) && secret_name(n.trim_start_matches('-')) {
            return (w.to_owned(), 1);
        }
    }
    if TOKEN_PREFIXES
        .iter()
        .any(|p| w.starts_with(p) && w.len() >= p.len() + 8)
    {
        return (REDACTED.to_owned(), 0);
    }
    if w.contains(['=', ';', '&', ',']) || w.contains(':') {
        return parts(w);
    }
    (w.to_owned(), 0)
}

/// Whether a flag's name (without its dashes) names a secret.
fn flag_names_secret(name: &str, dashes: usize) -> bool {
    (dashes == 1 && name.len() == 1 && name.starts_with(SECRET_SHORT_FLAGS))
        || (name.len() > 1 && secret_name(name))
}

/// Letters, digits, `-` and `_`: what a header, flag or variable name is made of.
fn header_name(n: &str) -> bool {
    !n.is_empty()
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
}

/// A word of `;`, `&` or `,` separated parts, each `NAME=VALUE`, `NAME:VALUE` or
/// `user:pw@host`; gives it with secret values redacted, and how many following words are secret.
fn parts(w: &str) -> (String, u8) {
    let mut out = String::with_capacity(w.len());
    let mut rest = w;
    loop {
        let end = rest.find([';', '&', ',']).unwrap_or(rest.len());
        let (shown, then) = part(&rest[..end]);
        out.push_str(&shown);
        if end == rest.len() {
            return (out, then);
        }
        out.push_str(&rest[end..end + 1]);
        rest = &rest[end + 1..];
    }
}

fn part(p: &str) -> (String, u8) {
    // `user:pw@host` (a DSN, `admin:X@db:5432/x`): the password goes.
    if let Some(at) = p.find('@') {
        if let Some(colon) = p[..at].find(':').filter(|_| !p[..at].contains('/')) {
            return (format!("{}:{REDACTED}{}", &p[..colon], &p[at..]), 0);
        }
    }
    let eq = p.find('=');
    let colon = p.find(':');
    let split = match (eq, colon) {
        (Some(e), Some(c)) => Some(e.min(c)),
        (e, c) => e.or(c),
    };
    let Some(i) = split else {
        return (p.to_owned(), 0);
    };
    let (name, value) = (&p[..i], &p[i + 1..]);
    let bare = name.trim_start_matches('-');
    if header_name(bare) && secret_name(bare) {
        if value.is_empty() {
            // `Authorization=` / `--password:` with the value in the next word.
            return (p.to_owned(), 1);
        }
        let scheme = SCHEMES.contains(&value.to_ascii_lowercase().as_str());
        return (
            format!("{name}{}{REDACTED}", &p[i..i + 1]),
            u8::from(scheme),
        );
    }
    if value.is_empty() {
        return (p.to_owned(), 0);
    }
    // `--header=Authorization:`, `--opt=token=X`: the value judged as a word of its own.
    let (shown, then) = judge(value);
    (format!("{name}{}{shown}", &p[i..i + 1]), then)
}

/// `s` with the string value of every `"KEY": "VALUE"` member whose key names a secret
/// redacted, with plain quotes (JSON) or `\"` (JSON inside a shell string).
fn json_pairs(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(':') || !s.contains('"') {
        return s.into();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('"') {
        let escaped = rest[..open].ends_with('\\');
        let quote = if escaped { "\\\"" } else { "\"" };
        let after_open = &rest[open + 1..];
        let Some(close) = after_open.find(quote) else {
            break;
        };
        let key = &after_open[..close];
        let after_key = &after_open[close + quote.len()..];
        let value_start = after_key
            .trim_start()
            .strip_prefix(':')
            .map(str::trim_start)
            .and_then(|v| v.strip_prefix(quote));
        match value_start {
            Some(v) if secret_name(key) && !key.contains(char::is_whitespace) => {
                let end = string_end(v, escaped).unwrap_or(v.len());
                let head = s.len() - rest.len();
                let value_at = s.len() - v.len();
                out.push_str(&s[head..value_at]);
                out.push_str(REDACTED);
                rest = &v[end..];
            }
            _ => {
                let upto = open + 1 + close + quote.len();
                out.push_str(&rest[..upto]);
                rest = &rest[upto..];
            }
        }
    }
    out.push_str(rest);
    out.into()
}

/// Where a JSON string's closing quote is in `v` (its text after the opening quote).
fn string_end(v: &str, escaped: bool) -> Option<usize> {
    if escaped {
        return v.find("\\\"");
    }
    let mut chars = v.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}
