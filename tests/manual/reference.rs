//! The configuration reference, rendered from the config types' JSON Schema
//! (`sluice::config::schema()`): a section per table, a row per key with its type and the doc
//! comment it was declared with; and the keys that have no such comment.

use serde_json::{Map, Value};

/// The page `docs/configuration-reference.md` holds.
pub(crate) fn render(schema: &Value) -> String {
    let mut out = String::from(HEAD);
    let mut sections = Vec::new();
    table(schema, schema, "", &mut sections);
    for (title, intro, rows) in sections {
        out.push_str(&format!("\n## {title}\n\n"));
        if !intro.is_empty() {
            out.push_str(&format!("{intro}\n\n"));
        }
        out.push_str("| key | type | what it is |\n|---|---|---|\n");
        for (key, ty, doc) in rows {
            out.push_str(&format!("| `{key}` | {ty} | {doc} |\n"));
        }
    }
    out
}

const HEAD: &str = "# Configuration reference

Every key of a config file, generated from the config types (`crates/sluice/src/config/raw*.rs`) by
`tests/manual.rs`: a key is documented where it is declared, a test fails when one is not, and
another when this page differs from what the types say (`SLUICE_BLESS=1 cargo test --test manual`
writes it anew). `sluice schema` prints the same as a JSON Schema, for an editor's TOML
completion. What each setting does in depth: [Configuration](configuration.md),
[Governance](governance.md), [Operations](operations.md), [Security](security.md).
";

type Rows = Vec<(String, String, String)>;

/// One table's rows into `out` (after the tables it holds, in the order they are declared).
fn table(root: &Value, obj: &Value, path: &str, out: &mut Vec<(String, String, Rows)>) {
    let mut rows = Vec::new();
    let mut inner = Vec::new();
    for (key, prop) in props(obj) {
        let doc = one_line(
            prop.get("description")
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        let at = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match kind(root, prop) {
            Kind::Table(t) => inner.push((format!("`[{at}]`"), doc, t, at)),
            Kind::Tables(t) => inner.push((format!("`[[{at}]]`"), doc, t, at)),
            Kind::Value(ty) => rows.push((key.clone(), ty, doc)),
        }
    }
    let title = if path.is_empty() {
        "Top level".to_owned()
    } else {
        String::new()
    };
    if !rows.is_empty() || path.is_empty() {
        out.push((title, String::new(), rows));
    }
    for (title, doc, t, at) in inner {
        let at_index = out.len();
        table(root, &t, &at, out);
        if at_index < out.len() {
            out[at_index].0 = title;
            out[at_index].1 = doc;
        } else {
            out.push((title, doc, Vec::new()));
        }
    }
}

fn props(obj: &Value) -> Vec<(String, &Value)> {
    let Some(Value::Object(m)) = obj.get("properties") else {
        return Vec::new();
    };
    m.iter().map(|(k, v)| (k.clone(), v)).collect()
}

enum Kind {
    Table(Value),
    Tables(Value),
    Value(String),
}

/// The definition a `$ref` names, or the value itself.
fn resolve<'a>(root: &'a Value, v: &'a Value) -> &'a Value {
    match v
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => &root["$defs"][name],
        None => v,
    }
}

/// `v` without a `null` alternative (an optional key).
fn required<'a>(root: &'a Value, v: &'a Value) -> &'a Value {
    if let Some(Value::Array(any)) = v.get("anyOf") {
        let some: Vec<&Value> = any
            .iter()
            .filter(|a| a.get("type") != Some(&Value::from("null")))
            .collect();
        if some.len() == 1 {
            return resolve(root, some[0]);
        }
    }
    resolve(root, v)
}

fn kind(root: &Value, prop: &Value) -> Kind {
    let v = required(root, prop);
    if v.get("properties").is_some() {
        return Kind::Table(v.clone());
    }
    if is(v, "array") {
        let item = required(root, &v["items"]);
        if item.get("properties").is_some() {
            return Kind::Tables(item.clone());
        }
        return Kind::Value(format!("array of {}", type_name(root, item)));
    }
    Kind::Value(type_name(root, v))
}

fn is(v: &Value, ty: &str) -> bool {
    match v.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == ty),
        _ => false,
    }
}

fn type_name(root: &Value, v: &Value) -> String {
    let v = required(root, v);
    if let Some(Value::Array(one_of)) = v.get("oneOf").or_else(|| v.get("enum")) {
        let names: Vec<String> = one_of
            .iter()
            .map(|c| {
                let value = c.get("const").unwrap_or(c);
                match c.get("description").and_then(Value::as_str) {
                    Some(d) => format!("`{value}`: {}", one_line(d).trim_end_matches('.')),
                    None => format!("`{value}`"),
                }
            })
            .collect();
        return names.join("; ");
    }
    if let Some(Value::Array(any)) = v.get("anyOf") {
        return any
            .iter()
            .map(|a| type_name(root, a))
            .collect::<Vec<_>>()
            .join(" or ");
    }
    if is(v, "object") {
        if let Some(extra) = v.get("additionalProperties").filter(|a| a.is_object()) {
            return format!("table of {}", type_name(root, extra));
        }
    }
    for ty in ["string", "integer", "number", "boolean"] {
        if is(v, ty) {
            return ty.to_owned();
        }
    }
    "value".to_owned()
}

fn one_line(doc: &str) -> String {
    doc.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The keys (as `table.key`) with no documentation, and the values of a choice without one.
pub(crate) fn undocumented(schema: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    walk(schema, schema, "", &mut missing);
    missing
}

fn walk(root: &Value, obj: &Value, path: &str, missing: &mut Vec<String>) {
    for (key, prop) in props(obj) {
        let at = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if prop
            .get("description")
            .and_then(Value::as_str)
            .is_none_or(|d| d.trim().is_empty())
        {
            missing.push(at.clone());
        }
        let v = required(root, prop);
        if let Some(Value::Array(one_of)) = v.get("oneOf") {
            for c in one_of.iter().filter(|c| c.get("description").is_none()) {
                missing.push(format!("{at} = {}", c.get("const").unwrap_or(c)));
            }
        }
        match kind(root, prop) {
            Kind::Table(t) | Kind::Tables(t) => walk(root, &t, &at, missing),
            Kind::Value(_) => {}
        }
    }
}

/// An empty object schema, for the tests of this module.
pub(crate) fn object(props: Map<String, Value>) -> Value {
    serde_json::json!({"type": "object", "properties": props})
}
