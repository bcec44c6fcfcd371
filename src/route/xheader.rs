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
            return Err(format!("x-mcp-header {:?} is used twice", p.name));
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
        let name = ann.as_str().filter(|s| !s.is_empty() && s.bytes().all(is_tchar));
        let name = name.ok_or_else(|| format!("x-mcp-header {ann} is not an HTTP token"))?;
        let kind = match obj.get("type").and_then(Value::as_str) {
            Some("string") => Kind::Str,
            Some("integer") => Kind::Int,
            Some("boolean") => Kind::Bool,
            other => return Err(format!("x-mcp-header {name:?} on a property of type {other:?}")),
        };
        out.push(ParamHeader { name: name.into(), header: format!("mcp-param-{}", name.to_ascii_lowercase()), path: path.clone(), kind });
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
        } else if matches!(child, Value::Object(_) | Value::Array(_)) && !matches!(key.as_str(), "const" | "default" | "enum" | "examples")
        {
            walk(child, None, out)?;
        }
    }
    Ok(())
}

/// The `Mcp-Param-*` headers a call's `arguments` need (for requests Sluice builds itself).
pub fn mirror(arguments: Option<&str>, anns: &[ParamHeader]) -> HeaderMap {
    let mut out = HeaderMap::new();
    let args: Value = arguments.and_then(|a| serde_json::from_str(a).ok()).unwrap_or(Value::Null);
    for ann in anns {
        let mut v = &args;
        for seg in &ann.path {
            v = v.get(seg).unwrap_or(&Value::Null);
        }
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => continue,
        };
        if let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(ann.header.as_bytes()), http::HeaderValue::from_str(&crate::mcp::headers::encode(&text)))
        {
            out.insert(name, value);
        }
    }
    out
}

/// Checks a call's `Mcp-Param-*` headers against its `arguments` (raw JSON, if any).
pub fn check(headers: &HeaderMap, arguments: Option<&str>, anns: &[ParamHeader]) -> Result<(), String> {
    if anns.is_empty() {
        return Ok(());
    }
    let args: Value = match arguments {
        Some(raw) => serde_json::from_str(raw).map_err(|_| "arguments are not JSON".to_owned())?,
        None => Value::Null,
    };
    for ann in anns {
        let mut v = &args;
        for seg in &ann.path {
            v = v.get(seg).unwrap_or(&Value::Null);
        }
        let header = headers.get(&ann.header);
        match (v.is_null(), header) {
            (true, None) => {}
            (true, Some(_)) => return Err(format!("header Mcp-Param-{} is sent but its argument is absent", ann.name)),
            (false, None) => return Err(format!("header Mcp-Param-{} is missing for an argument present in the body", ann.name)),
            (false, Some(h)) => {
                let got = crate::mcp::headers::decode(h).map_err(|e| format!("header Mcp-Param-{}: {e}", ann.name))?;
                let same = match ann.kind {
                    Kind::Str => v.as_str() == Some(got.as_ref()),
                    Kind::Bool => v.as_bool().map(|b| b.to_string()).as_deref() == Some(got.as_ref()),
                    Kind::Int => match (v.as_f64(), got.parse::<f64>()) {
                        (Some(a), Ok(b)) => a == b,
                        _ => false,
                    },
                };
                if !same {
                    return Err(format!("header Mcp-Param-{} does not match the body's argument", ann.name));
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
    }
}
