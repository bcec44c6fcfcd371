//! `x-mcp-header` annotations: reading them from a tool's `inputSchema` and checking the
//! `Mcp-Param-*` headers of a call against the body (digest §5.2).
//!
//! Takes a tool's input schema, or a call's headers and arguments; gives the annotated
//! arguments, or whether the headers agree with the body. Refuses a schema whose annotations
//! break the spec's constraints (the tool is then dropped from lists) and a call whose header is
//! missing, undecodable or different from its argument.

use http::HeaderMap;
use serde_json::Value;

/// The JSON type an annotated argument has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `"type": "string"`.
    Str,
    /// `"type": "integer"`.
    Int,
    /// `"type": "boolean"`.
    Bool,
}

/// One annotated argument: the header `Mcp-Param-{name}` mirrors the value at `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The annotation's value (the header name's suffix).
    pub name: String,
    /// Lower-cased full header name, `mcp-param-{name}`.
    pub header: String,
    /// Property names from `arguments` down to the value.
    pub path: Vec<String>,
    /// The argument's type.
    pub kind: Kind,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Reads and validates every `x-mcp-header` annotation of an input schema.
pub fn annotations(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut out = Vec::new();
    walk(schema, Some(Vec::new()), &mut out)?;
    let mut seen = std::collections::HashSet::new();
    for p in &out {
        if !seen.insert(p.header.clone()) {
            return Err("an x-mcp-header annotation is used twice".into());
        }
    }
    Ok(out)
}

fn walk(node: &Value, path: Option<Vec<String>>, out: &mut Vec<ParamHeader>) -> Result<(), String> {
    let Some(obj) = node.as_object() else {
        if let Some(items) = node.as_array() {
            for item in items {
                walk(item, None, out)?;
            }
        }
        return Ok(());
    };
    if let Some(ann) = obj.get("x-mcp-header") {
        let Some(path) = path.as_ref().filter(|p| !p.is_empty()) else {
            return Err("x-mcp-header on a schema not reachable through `properties`".into());
        };
        let name = ann
            .as_str()
            .filter(|s| !s.is_empty() && s.bytes().all(is_tchar));
        let name =
            name.ok_or_else(|| "an x-mcp-header annotation is not an HTTP token".to_owned())?;
        let kind = match obj.get("type").and_then(Value::as_str) {
            Some("string") => Kind::Str,
            Some("integer") => Kind::Int,
            Some("boolean") => Kind::Bool,
            _ => return Err("an x-mcp-header annotation on a property that is not a string, an integer or a boolean".into()),
        };
        out.push(ParamHeader {
            name: name.into(),
            header: format!("mcp-param-{}", name.to_ascii_lowercase()),
            path: path.clone(),
            kind,
        });
    }
    for (key, child) in obj {
        if key == "properties" {
            if let Some(props) = child.as_object() {
                for (prop, schema) in props {
                    let sub = path.as_ref().map(|p| {
                        let mut p = p.clone();
                        p.push(prop.clone());
                        p
                    });
                    walk(schema, sub, out)?;
                }
            }
        } else if matches!(child, Value::Object(_) | Value::Array(_))
            && !matches!(key.as_str(), "const" | "default" | "enum" | "examples")
        {
            walk(child, None, out)?;
        }
    }
    Ok(())
}

/// The raw value at each annotation's path in `arguments` (`None`: absent), in `anns` order.
/// Each object on the way is read once, whatever the number of annotations under it, so the
/// work is linear in the arguments' size times the deepest annotated path.
fn values<'a, 'b>(
    arguments: Option<&'a str>,
    anns: &'b [ParamHeader],
) -> Result<Vec<Option<&'a str>>, String> {
    let mut out = vec![None; anns.len()];
    let Some(raw) = arguments else { return Ok(out) };
    let mut order: Vec<usize> = (0..anns.len()).collect();
    order.sort_by(|&a, &b| anns[a].path.cmp(&anns[b].path));
    walk_values(raw, anns, &order, 0, &mut out)?;
    Ok(out)
}

fn walk_values<'a>(
    raw: &'a str,
    anns: &[ParamHeader],
    group: &[usize],
    depth: usize,
    out: &mut [Option<&'a str>],
) -> Result<(), String> {
    let Ok(obj) = serde_json::from_str::<crate::mcp::jsonrpc::RawObject<'a>>(raw) else {
        // Not an object (or not JSON): nothing below it is present.
        return if serde_json::from_str::<&serde_json::value::RawValue>(raw).is_ok() {
            Ok(())
        } else {
            Err("arguments are not JSON".into())
        };
    };
    let mut i = 0;
    while i < group.len() {
        let seg = &anns[group[i]].path[depth];
        let j = i + group[i..]
            .iter()
            .take_while(|&&a| anns[a].path[depth] == *seg)
            .count();
        if let Some(child) = obj.get(seg) {
            let (leaves, deeper): (Vec<usize>, Vec<usize>) = group[i..j]
                .iter()
                .partition(|&&a| anns[a].path.len() == depth + 1);
            for a in leaves {
                out[a] = Some(child);
            }
            if !deeper.is_empty() {
                walk_values(child, anns, &deeper, depth + 1, out)?;
            }
        }
        i = j;
    }
    Ok(())
}

/// The header text of an annotated argument's raw value (`None` for null, and for a value of
/// another type than the annotation's).
fn header_text(raw: &str, kind: Kind) -> Option<String> {
    match kind {
        Kind::Str => serde_json::from_str::<String>(raw).ok(),
        Kind::Bool => matches!(raw, "true" | "false").then(|| raw.to_owned()),
        Kind::Int => {
            // Integers travel in decimal; `42.0` and `4.2e1` are the integer 42.
            let n = crate::mcp::number::Exact::parse(raw)
                .filter(crate::mcp::number::Exact::is_integer)?;
            Some(n.to_decimal())
        }
    }
}

/// The `Mcp-Param-*` headers a call's `arguments` need (for requests Sluice builds itself).
pub fn mirror(arguments: Option<&str>, anns: &[ParamHeader]) -> HeaderMap {
    let mut out = HeaderMap::new();
    let Ok(found) = values(arguments, anns) else {
        return out;
    };
    for (ann, raw) in anns.iter().zip(found) {
        let Some(text) = raw.and_then(|r| header_text(r, ann.kind)) else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(ann.header.as_bytes()),
            http::HeaderValue::from_str(&crate::mcp::headers::encode(&text)),
        ) {
            out.insert(name, value);
        }
    }
    out
}

/// Checks a call's `Mcp-Param-*` headers against its `arguments` (raw JSON, if any). Values
/// are compared decoded and typed: strings as strings, booleans as `true`/`false`, integers
/// exactly (never through a float).
pub fn check(
    headers: &HeaderMap,
    arguments: Option<&str>,
    anns: &[ParamHeader],
) -> Result<(), String> {
    if anns.is_empty() {
        return Ok(());
    }
    let found = values(arguments, anns)?;
    for (ann, raw) in anns.iter().zip(found) {
        let present = raw.filter(|r| *r != "null");
        let header = headers.get(&ann.header);
        match (present, header) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(format!(
                    "header Mcp-Param-{} is sent but its argument is absent",
                    ann.name
                ))
            }
            (Some(_), None) => {
                return Err(format!(
                    "header Mcp-Param-{} is missing for an argument present in the body",
                    ann.name
                ))
            }
            (Some(v), Some(h)) => {
                let got = crate::mcp::headers::decode(h)
                    .map_err(|e| format!("header Mcp-Param-{}: {e}", ann.name))?;
                let same = match ann.kind {
                    Kind::Str => serde_json::from_str::<String>(v).is_ok_and(|s| s == got.as_ref()),
                    Kind::Bool => matches!(v, "true" | "false") && v == got.as_ref(),
                    Kind::Int => match (
                        crate::mcp::number::Exact::parse(v),
                        crate::mcp::number::decimal_integer(&got),
                    ) {
                        (Some(a), Some(b)) => a == b,
                        _ => false,
                    },
                };
                if !same {
                    return Err(format!(
                        "header Mcp-Param-{} does not match the body's argument",
                        ann.name
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_on_nested_properties_are_read() {
        let s = json!({"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},
            "o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}});
        let a = annotations(&s).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].path, vec!["o".to_owned(), "n".to_owned()]);
    }

    #[test]
    fn invalid_annotations_are_refused() {
        for s in [
            json!({"properties":{"a":{"type":"number","x-mcp-header":"A"}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":""}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}),
            json!({"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}),
            json!({"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}),
        ] {
            assert!(annotations(&s).is_err(), "{s}");
        }
    }

    #[test]
    fn headers_must_mirror_present_arguments() {
        let anns =
            annotations(&json!({"properties":{"r":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}))
                .unwrap();
        let mut h = HeaderMap::new();
        assert!(check(&h, Some(r#"{"r":"eu"}"#), &anns).is_err());
        h.insert("mcp-param-region", "eu".parse().unwrap());
        assert!(check(&h, Some(r#"{"r":"eu"}"#), &anns).is_ok());
        h.insert("mcp-param-n", "42".parse().unwrap());
        assert!(check(&h, Some(r#"{"r":"eu","n":42.0}"#), &anns).is_ok());
        assert!(check(&h, Some(r#"{"r":"us","n":42}"#), &anns).is_err());
        assert!(
            check(&h, Some(r#"{"r":"eu","n":4.2e1}"#), &anns).is_ok(),
            "integers compare by value"
        );
        assert!(check(&h, Some(r#"{"r":"eu","n":42.5}"#), &anns).is_err());
        h.insert("mcp-param-n", "9007199254740992".parse().unwrap());
        assert!(
            check(&h, Some(r#"{"r":"eu","n":9007199254740993}"#), &anns).is_err(),
            "never through a float"
        );
        assert!(check(&h, Some(r#"{"r":"eu","n":9007199254740992}"#), &anns).is_ok());
        h.insert("mcp-param-n", "1e2".parse().unwrap());
        assert!(
            check(&h, Some(r#"{"r":"eu","n":100}"#), &anns).is_err(),
            "headers carry integers in decimal"
        );
        h.insert("mcp-param-n", "100".parse().unwrap());
        assert!(
            check(&h, Some(r#"{"r":"e\u0075","n":100}"#), &anns).is_ok(),
            "strings compare decoded"
        );
        assert!(
            check(&h, Some(r#"{"r":"eu","n":100,"r":"us"}"#), &anns).is_err(),
            "the last of a repeated member counts"
        );
    }

    #[test]
    fn mirrored_headers_carry_the_exact_values() {
        let anns = annotations(&json!({"properties":{"n":{"type":"integer","x-mcp-header":"N"},
            "o":{"type":"object","properties":{"s":{"type":"string","x-mcp-header":"S"},"b":{"type":"boolean","x-mcp-header":"B"}}}}}))
        .unwrap();
        let h = mirror(
            Some(r#"{"n":9007199254740993.0e0,"o":{"s":" x","b":true}}"#),
            &anns,
        );
        assert_eq!(h["mcp-param-n"], "9007199254740993");
        assert_eq!(h["mcp-param-s"], "=?base64?IHg=?=");
        assert_eq!(h["mcp-param-b"], "true");
        assert!(check(
            &h,
            Some(r#"{"n":9007199254740993,"o":{"s":" x","b":true}}"#),
            &anns
        )
        .is_ok());
        assert!(mirror(Some(r#"{"n":1.5,"o":null}"#), &anns).is_empty());
    }
}
