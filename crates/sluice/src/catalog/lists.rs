//! Fetching an upstream's lists into federation tables.
//!
//! Takes an upstream and a list kind; gives a [`ListTable`] built from every page (cursors
//! followed up to `limits.max_list_pages`), with names rewritten to their public form. Bounded:
//! at most `limits.max_list_items` items per upstream per list (the rest dropped, with one
//! warning naming the upstream and the limit; no further page is fetched). Refuses (drops with a
//! warning) tools whose `x-mcp-header` annotations are invalid and names that would exceed 128
//! characters once prefixed.

use std::time::Instant;

use indexmap::IndexMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::route::names::Names;
use crate::route::table::{Item, ListKind, ListTable};
use crate::route::xheader;
use crate::upstream::Upstream;

/// Fetches all pages of one list from one upstream.
pub async fn fetch(
    catalog: &super::Catalog,
    up: &std::sync::Arc<Upstream>,
    kind: ListKind,
) -> Result<ListTable, String> {
    let (names, max_pages, max_items) = (
        &catalog.names,
        catalog.limits.max_list_pages,
        catalog.limits.max_list_items,
    );
    let own_hints = crate::link::gives_cache_hints(up, &up.status());
    let started = Instant::now();
    let mut items = Vec::new();
    let mut ttl_ms = u64::MAX;
    let mut public = true;
    let mut cursor: Option<Value> = None;
    for _ in 0..max_pages.max(1) {
        let mut extra = Map::new();
        if let Some(c) = cursor.take() {
            extra.insert("cursor".into(), c);
        }
        let result = catalog.link.request(up, &kind.method(), extra).await?;
        let page: IndexMap<String, Box<RawValue>> =
            serde_json::from_str(result.get()).map_err(|_| {
                format!(
                    "upstream '{}' sent a {} result that is not an object",
                    up.name,
                    kind.name()
                )
            })?;
        if own_hints {
            let ttl = page
                .get("ttlMs")
                .and_then(|r| r.get().parse::<i64>().ok())
                .unwrap_or(0)
                .max(0) as u64;
            ttl_ms = ttl_ms.min(ttl);
            public &= page.get("cacheScope").map(|r| r.get()) == Some("\"public\"");
        } else {
            // A legacy server gives no hints: use the configured ones (0 / private by default).
            let s = up.status();
            let d = s.discovered.as_ref();
            ttl_ms = ttl_ms.min(d.map_or(0, |d| d.ttl_ms));
            public &= d.is_some_and(|d| d.public);
        }
        if let Some(list) = page.get(kind.member()) {
            if !add_page(up, kind, names, list, &mut items, max_items) {
                tracing::warn!(upstream = %up.name, list = kind.name(), limit = max_items, "list truncated at limits.max_list_items");
                cursor = None;
                break;
            }
        }
        match page.get("nextCursor").map(|r| r.get()) {
            Some(c) if c != "null" => cursor = serde_json::from_str(c).ok(),
            _ => break,
        }
    }
    if cursor.is_some() {
        tracing::warn!(upstream = %up.name, list = kind.name(), "list truncated at limits.max_list_pages");
    }
    Ok(ListTable::new(
        items,
        if ttl_ms == u64::MAX { 0 } else { ttl_ms },
        public,
        started,
    ))
}

/// Adds one page's items to `items`, up to `max` in all; `false` when the page held more than fit.
fn add_page(
    up: &Upstream,
    kind: ListKind,
    names: &Names,
    list: &RawValue,
    items: &mut Vec<Item>,
    max: usize,
) -> bool {
    let raw_items: Vec<Box<RawValue>> = serde_json::from_str(list.get()).unwrap_or_default();
    for raw in raw_items {
        if items.len() >= max {
            return false;
        }
        if let Some(item) = build_item(up, kind, names, &raw) {
            items.push(item);
        }
    }
    true
}

fn build_item(up: &Upstream, kind: ListKind, names: &Names, raw: &RawValue) -> Option<Item> {
    // Compacted once here, so serving a list is a plain concatenation.
    let compact = RawValue::from_string(crate::mcp::compact_json(raw.get()).into_owned()).ok()?;
    let raw: &RawValue = &compact;
    let mut desc: IndexMap<String, Box<RawValue>> = serde_json::from_str(raw.get()).ok()?;
    let key_member = match kind {
        ListKind::Tools | ListKind::Prompts => "name",
        ListKind::Resources => "uri",
        ListKind::Templates => "uriTemplate",
    };
    let key: String = serde_json::from_str(desc.get(key_member)?.get()).ok()?;
    let mut headers = Vec::new();
    // Parsed unless the text certainly has no annotation: a key may be spelled with escapes.
    if kind == ListKind::Tools && (raw.get().contains("x-mcp-header") || raw.get().contains('\\')) {
        let schema: Value = desc
            .get("inputSchema")
            .and_then(|s| serde_json::from_str(s.get()).ok())
            .unwrap_or(Value::Null);
        match xheader::annotations(&schema) {
            Ok(h) => headers = h,
            Err(why) => {
                tracing::warn!(upstream = %up.name, tool = %crate::telemetry::peer_name(&key), reason = %crate::escape::Escaped(&why), "tool dropped: invalid x-mcp-header annotation");
                return None;
            }
        }
    }
    let mut hints = crate::route::table::ToolHints::default();
    if kind == ListKind::Tools {
        if let Some(a) = desc
            .get("annotations")
            .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
        {
            hints.destructive = a
                .get("destructiveHint")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            hints.read_only = a
                .get("readOnlyHint")
                .and_then(Value::as_bool)
                .unwrap_or(false);
        }
    }
    if !kind.named() {
        return Some(Item {
            public: key.clone(),
            key,
            raw: raw.to_owned(),
            headers,
            hints,
        });
    }
    let Some(public) = names.publish(&up.name, &key) else {
        tracing::warn!(upstream = %up.name, name = %crate::telemetry::peer_name(&key), "dropped: prefixed name longer than 128 characters");
        return None;
    };
    let raw = if public == key {
        raw.to_owned()
    } else {
        let name = RawValue::from_string(Value::String(public.clone()).to_string()).ok()?;
        desc.insert("name".into(), name);
        RawValue::from_string(serde_json::to_string(&desc).ok()?).ok()?
    };
    Some(Item {
        key,
        public,
        raw,
        headers,
        hints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream() -> (Upstream, Names) {
        let cfg = crate::config::Config::from_toml(
            "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
            "t",
            &Default::default(),
        )
        .expect("config");
        (
            Upstream::new(
                &cfg.upstreams[0],
                cfg.limits.max_response_bytes,
                cfg.timeouts.response,
                cfg.timeouts.shutdown,
            )
            .expect("upstream"),
            Names::new(cfg.prefixed(), &cfg.separator),
        )
    }

    fn page(from: usize, n: usize) -> Box<RawValue> {
        let tools: Vec<Value> = (from..from + n)
            .map(|i| serde_json::json!({"name": format!("t{i}"), "inputSchema": {}}))
            .collect();
        RawValue::from_string(Value::Array(tools).to_string()).expect("json")
    }

    #[test]
    fn a_list_keeps_at_most_max_list_items_across_pages() {
        let (up, names) = upstream();
        let mut items = Vec::new();
        assert!(add_page(
            &up,
            ListKind::Tools,
            &names,
            &page(0, 2),
            &mut items,
            3
        ));
        assert!(
            !add_page(&up, ListKind::Tools, &names, &page(2, 5), &mut items, 3),
            "the second page overflows"
        );
        assert_eq!(
            items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(),
            ["t0", "t1", "t2"]
        );
        assert!(!add_page(
            &up,
            ListKind::Tools,
            &names,
            &page(7, 1),
            &mut items,
            3
        ));
        assert_eq!(items.len(), 3);
    }
}
