//! Printing the config without its secrets.
//!
//! Takes a URL, a header map, a key list or a whole [`Config`]; gives the same with credentials
//! replaced (URL userinfo and query values, header values, key secrets), still valid where it
//! was (a redacted URL is a URL, and the printed config loads again). Refuses nothing: a config
//! that cannot be printed prints a `#` comment saying so.

use serde_json::{json, Map, Value};

use super::Config;

/// `url` with its userinfo and every query value replaced by `redacted` (still a valid URL, so
/// a printed config loads again).
pub fn redact_url(url: &str) -> String {
    let (head, frag) = match url.split_once('#') {
        Some((h, f)) => (h, Some(f)),
        None => (url, None),
    };
    let (head, query) = match head.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (head, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
            let authority = authority.rsplit_once('@').map_or(authority.to_owned(), |(_, host)| format!("redacted@{host}"));
            format!("{scheme}://{authority}{}", redact_path_params(path))
        }
        None => head.to_owned(),
    };
    if let Some(q) = query {
        // Every value goes, and a bare value (`?secret`) too.
        let pairs: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) => format!("{k}=redacted"),
                None if kv.is_empty() => String::new(),
                None => "redacted".to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    if frag.is_some() {
        // A fragment can carry a token (`#access_token=…`): never printed.
        out.push_str("#redacted");
    }
    out
}

/// Path segment parameters (`;jsessionid=…`) with their values redacted.
fn redact_path_params(path: &str) -> String {
    path.split('/')
        .map(|seg| match seg.split_once(';') {
            Some((name, params)) => {
                let params: Vec<String> =
                    params.split(';').map(|p| p.split_once('=').map_or("redacted".to_owned(), |(k, _)| format!("{k}=redacted"))).collect();
                format!("{name};{}", params.join(";"))
            }
            None => seg.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Serializes a URL through [`redact_url`].
pub(super) fn redact_url_ser<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

/// Serializes headers with every value `<redacted>`.
pub(super) fn redact_map<S: serde::Serializer>(h: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
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
        q.serialize_element(&format!("{}:<redacted>", k.split(':').next().unwrap_or("?")))?;
    }
    q.end()
}

/// The effective config as TOML with secrets redacted: serialized to JSON (the secrets are
/// redacted by the serializers above), its derived views put back where the file writes them,
/// then printed as TOML.
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
    toml::to_string(&v).unwrap_or_else(|e| format!("# cannot print the config: {e}"))
}

/// `auth.upstream_scopes` goes back into each `[[upstream]]` as its `required_scopes`.
fn unfold_upstream_scopes(c: &Config, v: &mut Map<String, Value>) {
    if let Some(auth) = v.get_mut("auth").and_then(|a| a.as_object_mut()) {
        auth.remove("upstream_scopes");
    }
    if let Some(ups) = v.get_mut("upstream").and_then(|u| u.as_array_mut()) {
        for u in ups {
            let name = u.get("name").and_then(|n| n.as_str()).unwrap_or("").to_owned();
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
    if let (Some(b), false) = (v.get_mut("budget").and_then(|b| b.as_object_mut()), overrides.is_empty()) {
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
