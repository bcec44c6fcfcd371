//! Printing the config without its secrets: the one redaction `sluice check` passes everything
//! it prints through.
//!
//! Takes a whole [`Config`] (or any text `check` prints); gives the same with credentials
//! replaced, still valid where it was (a redacted URL is a URL, a redacted argument an argument,
//! and the printed config loads again). Refuses nothing: a config that cannot be printed prints
//! a `#` comment saying so.
//!
//! Two layers, so no field has to remember to redact itself:
//! - values that are secret wherever they are and have no shape to recognise them by (header
//!   values, stdio `env` values, `[state] keys`) are redacted by their serializers;
//! - then [`scrub`] walks the whole serialized tree, every string and every list of strings,
//!   whatever field it came from, read as a command line word by word (`words.rs`: across
//!   arguments and inside a shell's `-c` string alike): URLs lose their userinfo, query values
//!   and fragment ([`redact_url`]); the value after a secret-named flag (`--token V`, `-k V`),
//!   header name (`Authorization: Bearer V`) or `NAME=` scheme, secret-named `--flag=V`,
//!   `NAME=V`, `NAME:V` (also in `;`-separated connection strings), `-pV`, `user:pw@host`,
//!   JSON members with secret-named keys and well-known token prefixes are replaced
//!   ([`secret_name`]); a string member whose key's last word is secret-named (`password =
//!   "…"`) is replaced whole.

use serde_json::{json, Map, Value};

use super::Config;

mod words;

/// What a redacted value prints as.
const REDACTED: &str = "redacted";

/// Words that make a name (a flag, a variable, a header, a config key) a secret's: matched
/// case-insensitively on each word of the name (words split at `-`, `_` and `.`), a trailing
/// `s` ignored, so `--token`, `--api-key`, `--apikey`, `--access-token`, `--client-secret`,
/// `--password`, `--passwd`, `--auth`, `--bearer`, `--credentials`, `GITHUB_TOKEN`, `X-Api-Key`
/// and `Authorization` all are.
const SECRET_WORDS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "secret",
    "key",
    "apikey",
    "auth",
    "authorization",
    "bearer",
    "credential",
    "cookie",
    "pw",
    "pat",
    "sig",
    "signature",
    "session",
    "jwt",
    "private",
];

/// Config keys whose names end in a secret's word but whose values are a choice of method.
const NAMES_A_METHOD: &[&str] = &["token_endpoint_auth"];

/// A word that ends with one of these is a secret's too (`accesstoken`, `clientsecret`).
const SECRET_SUFFIXES: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "credential",
    "credentials",
];

/// Short flags taken as naming a secret (`-p` is a password as often as a port: it prints
/// redacted either way). Matched exactly.
const SECRET_SHORT_FLAGS: &[&str] = &["p"];

/// Whether `name` (a flag without its dashes, a variable, a header, a config key) names a secret.
pub fn secret_name(name: &str) -> bool {
    if SECRET_SHORT_FLAGS.contains(&name) {
        return true;
    }
    name.split(['-', '_', '.']).any(|w| {
        let w = w.to_ascii_lowercase();
        let one = w.strip_suffix('s').unwrap_or(&w);
        SECRET_WORDS.contains(&w.as_str())
            || SECRET_WORDS.contains(&one)
            || SECRET_SUFFIXES.iter().any(|s| w.ends_with(s))
    })
}

/// `url` with its userinfo (of every `scheme://` in it), every query value and its fragment
/// replaced by `redacted` (still a valid URL, so a printed config loads again).
pub fn redact_url(url: &str) -> String {
    let (head, frag) = match url.split_once('#') {
        Some((h, f)) => (h, Some(f)),
        None => (url, None),
    };
    let (head, query) = match head.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (head, None),
    };
    let mut out = match head.find("://") {
        Some(i) => {
            let rest = &head[i + 3..];
            let (authority, path) = rest.find('/').map_or((rest, ""), |j| rest.split_at(j));
            format!(
                "{}{}{}",
                &head[..i + 3],
                authority,
                redact_path_params(path)
            )
        }
        None => head.to_owned(),
    };
    out = redact_userinfo(&out);
    if let Some(q) = query {
        // Every value goes, and a bare value (`?secret`) too.
        let pairs: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) => format!("{k}={REDACTED}"),
                None if kv.is_empty() => String::new(),
                None => REDACTED.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    if frag.is_some() {
        // A fragment can carry a token (`#access_token=…`): never printed.
        out.push('#');
        out.push_str(REDACTED);
    }
    out
}

/// The userinfo after every `://` (up to an `@` before the next `/`) replaced: a list of URLs in
/// one string (`http://a,http://u:p@b`) loses each.
fn redact_userinfo(s: &str) -> String {
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("://").map(|i| from + i + 3) {
        let end = s[i..].find('/').map_or(s.len(), |j| i + j);
        if let Some(at) = s[i..end].rfind('@') {
            cut.push((i, i + at));
        }
        from = i;
    }
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (a, b) in cut {
        out.push_str(&s[last..a]);
        out.push_str(REDACTED);
        last = b;
    }
    out.push_str(&s[last..]);
    out
}

/// Path segment parameters (`;jsessionid=…`) with their values redacted, and a segment that
/// looks like a credential ([`random_looking`]) too.
fn redact_path_params(path: &str) -> String {
    path.split('/')
        .map(|seg| match seg.split_once(';') {
            Some((name, params)) => {
                let params: Vec<String> = params
                    .split(';')
                    .map(|p| {
                        p.split_once('=')
                            .map_or(REDACTED.to_owned(), |(k, _)| format!("{k}={REDACTED}"))
                    })
                    .collect();
                format!("{name};{}", params.join(";"))
            }
            None if random_looking(seg) => REDACTED.to_owned(),
            None => seg.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A path segment that looks like a credential, as a webhook's URL carries one
/// (`/services/T0/B0/<24 characters>`): at least 20 letters, digits, `-` or `_`, with letters and
/// digits both.
fn random_looking(seg: &str) -> bool {
    let b = seg.as_bytes();
    b.len() >= 20
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_".contains(c))
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_alphabetic)
}

/// One word of text (no whitespace): a URL in it redacted, or a secret-named `--flag=VALUE` or
/// `NAME=VALUE` given as `--flag=redacted`.
fn redact_word(w: &str) -> String {
    if let Some((name, _)) = w.split_once('=') {
        let bare = name.trim_start_matches('-');
        let is_name = !bare.is_empty()
            && bare
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
        if is_name && secret_name(bare) {
            return format!("{name}={REDACTED}");
        }
    }
    if w.contains("://") {
        return redact_url(w);
    }
    w.to_owned()
}

/// Any text `sluice check` prints (a config value, an error, a report line) through the one
/// redaction: each whitespace-separated word through the URL and `NAME=VALUE` rules.
pub fn redact_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut word = String::new();
    for c in s.chars() {
        if c.is_whitespace() {
            out.push_str(&redact_word(&word));
            word.clear();
            out.push(c);
        } else {
            word.push(c);
        }
    }
    out.push_str(&redact_word(&word));
    out
}

/// Every string of a serialized config read as a command line of one argument, every list of
/// strings as a command line ([`words`]: the value after a secret-named flag or header name,
/// secret `NAME=VALUE` parts, userinfo, JSON members, well-known tokens), and every string member
/// whose key ends in a secret-named word replaced whole.
pub(super) fn scrub(v: &mut Value) {
    match v {
        Value::String(s) => *s = words::redact_line(&[s.as_str()]).pop().unwrap_or_default(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let line: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            let shown = words::redact_line(&line);
            *items = shown.into_iter().map(Value::String).collect();
        }
        Value::Array(items) => items.iter_mut().for_each(scrub),
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                // `password = "…"`, `client_secret = "…"`: named for a secret by its last word
                // (`max_tokens_action`, `api_keys_env` name something else).
                // `token_endpoint_auth = "client_secret_basic"` names a method, not a secret.
                let secret = k.rsplit(['_', '-', '.']).next().is_some_and(secret_name)
                    && !NAMES_A_METHOD.contains(&k.as_str());
                if let (true, Value::String(s)) = (secret, &mut *x) {
                    if s != "<redacted>" {
                        *s = REDACTED.to_owned();
                    }
                }
                scrub(x);
            }
        }
        _ => {}
    }
}

/// Serializes headers (or env) with every value `<redacted>`: secret wherever they are, with
/// nothing to recognise them by.
pub(super) fn redact_map<S: serde::Serializer>(
    h: &[(String, String)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(h.len()))?;
    for (k, _) in h {
        m.serialize_entry(k, "<redacted>")?;
    }
    m.end()
}

/// Serializes `ID:SECRET` keys as `ID:<redacted>`.
pub(super) fn redact_list<S: serde::Serializer>(v: &[String], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut q = s.serialize_seq(Some(v.len()))?;
    for k in v {
        q.serialize_element(&format!(
            "{}:<redacted>",
            k.split(':').next().unwrap_or("?")
        ))?;
    }
    q.end()
}

/// The effective config as TOML with secrets redacted: serialized to JSON (values secret by
/// position redacted by the serializers above), its derived views put back where the file
/// writes them, the whole tree [`scrub`]bed, then printed as TOML.
pub(super) fn print(c: &Config) -> String {
    let mut v = match serde_json::to_value(c) {
        Ok(Value::Object(m)) => m,
        _ => return "# cannot print the config".into(),
    };
    // Derived views go back where the file writes them.
    unfold_upstream_scopes(c, &mut v);
    nest_budget_overrides(c, &mut v);
    let mut v = Value::Object(v);
    strip_nulls(&mut v);
    scrub(&mut v);
    toml::to_string(&v)
        .unwrap_or_else(|e| format!("# cannot print the config: {}", redact_text(&e.to_string())))
}

/// `auth.upstream_scopes` goes back into each `[[upstream]]` as its `required_scopes`.
fn unfold_upstream_scopes(c: &Config, v: &mut Map<String, Value>) {
    if let Some(auth) = v.get_mut("auth").and_then(|a| a.as_object_mut()) {
        auth.remove("upstream_scopes");
    }
    if let Some(ups) = v.get_mut("upstream").and_then(|u| u.as_array_mut()) {
        for u in ups {
            let name = u
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_owned();
            if let Some((_, scopes)) = c.auth.upstream_scopes.iter().find(|(n, _)| *n == name) {
                u["required_scopes"] = json!(scopes);
            }
        }
    }
}

/// `budget_overrides` goes back under `[budget]` as `[[budget.override]]` tables.
fn nest_budget_overrides(c: &Config, v: &mut Map<String, Value>) {
    let overrides: Vec<Value> = c
        .budget_overrides
        .iter()
        .filter_map(|o| {
            let mut m = serde_json::to_value(&o.limits).ok()?;
            if let Some(u) = &o.upstream {
                m["upstream"] = u.clone().into();
            }
            if let Some(g) = &o.group {
                m["group"] = g.clone().into();
            }
            Some(m)
        })
        .collect();
    v.remove("budget_overrides");
    if let (Some(b), false) = (
        v.get_mut("budget").and_then(|b| b.as_object_mut()),
        overrides.is_empty(),
    ) {
        b.insert("override".into(), overrides.into());
    }
}

/// TOML has no null: absent options are left out.
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
