//! `subscriptions/listen`: one listen stream per modern upstream, fanned out to client listens.
//!
//! Takes upstream listen streams (list-changed and resource-updated notifications) and client
//! listen requests; gives each client an acknowledgement first, then only the notifications it
//! opted into, tagged with its own subscription id; never progress or log messages. Refuses a
//! listen naming more than `limits.max_resource_subscriptions` resource URIs (-32602). Bounded:
//! the URIs wanted upstream (all listens together) are at most 16 × that limit; past it new URIs
//! are not subscribed upstream (one warning per listen, with the limit), and URIs already wanted
//! are still delivered. With `hide`/`show` rules a list change is told to a listener only when
//! its own view changed (`view.rs`). An upstream whose listen fails, ends, or stays silent past
//! `timeouts.stream_idle_ms` is listened to again after `timeouts.listen_retry_ms`.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use tokio::sync::{broadcast, mpsc};

use crate::catalog::Reach;
use crate::mcp::jsonrpc;
use crate::mcp::method::Method;
use crate::mcp::sse;
use crate::route::table::ListKind;
use crate::upstream::client::{modern_headers, Answer};
use crate::upstream::{discover, Upstream};

pub(crate) mod view;
pub use crate::catalog::hub::{Change, Hub, Published, WantGuard, MAX_URI};

/// Keeps one listen stream open to `up` until shutdown, on the current generation's [`Reach`]
/// (its timeouts, and who may reach which upstream for the URIs it subscribes to).
pub async fn upstream_listen(reach: Arc<Reach>, up: Arc<Upstream>) {
    let mut reach = reach;
    loop {
        // Until shutdown, or a reload retires this upstream; on the current generation.
        reach = reach.latest();
        let catalog = reach.catalog.clone();
        if catalog.shutdown.is_cancelled() || up.retired.is_cancelled() {
            return;
        }
        // Legacy upstreams report list changes on their sessions' GET streams instead.
        let status = up.status();
        let mut pause = catalog.timeouts.listen_retry;
        if status.healthy && crate::link::listens(&up, &status) {
            let uris = wanted_by(&reach, &up);
            let once = listen_once(&catalog, &up, &uris);
            tokio::pin!(once);
            loop {
                tokio::select! {
                    _ = catalog.shutdown.cancelled() => return,
                    _ = up.retired.cancelled() => return,
                    // Re-subscribe only when this upstream's own URI set changed.
                    _ = catalog.hub.changed.notified() => if wanted_by(&reach, &up) != uris { break },
                    supported = &mut once => {
                        if !supported {
                            // No listen stream here (e.g. -32601): ask again at the refresh pace only.
                            pause = catalog.timeouts.refresh;
                        }
                        break;
                    }
                }
            }
        }
        tokio::select! {
            _ = catalog.shutdown.cancelled() => return,
            _ = up.retired.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Holds one upstream listen stream; `false` when the upstream does not offer one.
/// The URIs `up` is to be told of: only for principals that may reach it, and only what it
/// serves (a URI no upstream lists or matches goes to every upstream such a principal may reach).
fn wanted_by(reach: &Reach, up: &Upstream) -> Vec<String> {
    let lists = |o: &Upstream, u: &str| {
        o.list(ListKind::Resources).by_key(u).is_some()
            || o.list(ListKind::Templates)
                .items
                .iter()
                .any(|t| crate::route::uri::matches(&t.key, u))
    };
    reach.catalog.hub.wanted_where(|p, u| {
        reach.auth.may_reach(p, &up.name)
            && (lists(up, u) || !reach.reachable(p).any(|o| lists(o, u)))
    })
}

async fn listen_once(
    catalog: &Arc<crate::catalog::Catalog>,
    up: &Arc<Upstream>,
    uris: &[String],
) -> bool {
    let mut filter = Map::new();
    for (key, cap) in [
        ("toolsListChanged", "tools"),
        ("promptsListChanged", "prompts"),
        ("resourcesListChanged", "resources"),
    ] {
        if up.serves(cap) {
            filter.insert(key.into(), true.into());
        }
    }
    if up.serves("resources") && !uris.is_empty() {
        filter.insert("resourceSubscriptions".into(), json!(uris));
    }
    let mut extra = Map::new();
    extra.insert("notifications".into(), Value::Object(filter));
    let body = discover::internal_body(&Method::SubscriptionsListen, extra);
    let headers = modern_headers(&up.modern_base, Method::SubscriptionsListen.as_str(), None);
    let Ok(Answer::Sse(mut stream)) = up
        .post_modern(
            &catalog.link.client,
            &Method::SubscriptionsListen,
            headers,
            body,
            None,
        )
        .await
    else {
        return false;
    };
    loop {
        let msg = match stream.next().await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                // Silent past timeouts.stream_idle_ms (or broken): the caller listens again.
                tracing::debug!(upstream = %up.name, timeout = e.is_timeout(), "upstream listen stream ended");
                break;
            }
        };
        let msg = msg.head();
        if msg.is_response() {
            return true;
        }
        let Some(change) = msg
            .method
            .as_ref()
            .and_then(|m| Change::of(m, msg.params.as_ref().map(|p| p.get())))
        else {
            continue;
        };
        let announced = std::time::Instant::now();
        for kind in change.kinds() {
            catalog.invalidate(up, *kind).await;
        }
        catalog.hub.publish(&up.name, change, announced);
    }
    true
}

/// What a client listen asked for.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// `toolsListChanged`.
    pub tools: bool,
    /// `promptsListChanged`.
    pub prompts: bool,
    /// `resourcesListChanged`.
    pub resources: bool,
    /// `resourceSubscriptions`.
    pub uris: Vec<String>,
}

impl Filter {
    /// Reads the `notifications` member of a listen request; refuses more than
    /// `max_uris` resource subscriptions.
    pub fn parse(raw: Option<&str>, max_uris: usize) -> Result<Filter, String> {
        let v: Value = match raw {
            Some(r) => {
                serde_json::from_str(r).map_err(|_| "notifications must be an object".to_owned())?
            }
            None => return Ok(Filter::default()),
        };
        let obj = v.as_object().ok_or("notifications must be an object")?;
        let flag = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
        let uris = match obj.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.len() > max_uris => {
                return Err(format!(
                    "resourceSubscriptions names {} URIs; at most {max_uris} are allowed (limits.max_resource_subscriptions)",
                    a.len()
                ))
            }
            Some(Value::Array(a)) => a
                .iter()
                .map(|u| match u.as_str() {
                    Some(u) if u.len() > MAX_URI => Err("a resourceSubscriptions URI is longer than 2048 bytes"),
                    Some(u) => Ok(u.to_owned()),
                    None => Err("resourceSubscriptions must hold strings"),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("resourceSubscriptions must be an array of URIs".into()),
        };
        Ok(Filter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris,
        })
    }

    /// The JSON form sent in the acknowledgement.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.tools {
            m.insert("toolsListChanged".into(), true.into());
        }
        if self.prompts {
            m.insert("promptsListChanged".into(), true.into());
        }
        if self.resources {
            m.insert("resourcesListChanged".into(), true.into());
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(m)
    }

    fn notification(&self, c: &Change) -> Option<(Method, Map<String, Value>)> {
        let wanted = match c {
            Change::Tools => self.tools,
            Change::Prompts => self.prompts,
            Change::Resources => self.resources,
            Change::Updated(u) => self
                .uris
                .iter()
                .any(|s| u == s || u.starts_with(&format!("{}/", s.trim_end_matches('/')))),
        };
        match wanted {
            true => Some(c.notification()),
            false => None,
        }
    }
}

/// What a client listen stream is answered with besides the changes: the credentials it was
/// opened under, which a reload may revoke, and Sluice's `serverInfo` for its final result.
pub struct Opened {
    /// Cancelled when a reload changes who may authenticate.
    pub revoked: tokio_util::sync::CancellationToken,
    /// Sluice's `serverInfo`.
    pub server_info: Value,
}

/// Runs one client listen: acknowledgement, then matching notifications, then on shutdown the
/// listen result. Returns the SSE receiver for the response.
pub fn client_listen(
    reach: Arc<Reach>,
    opened: Opened,
    id: String,
    honoured: Filter,
    principal: crate::auth::Principal,
) -> mpsc::Receiver<sse::Frame> {
    let (tx, rx) = mpsc::channel(64);
    // The views first, then the subscription: no change falls between them.
    let mut views = view::Views::start(&reach, &principal);
    let mut changes = reach.catalog.hub.subscribe();
    let sub_id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
    let ack = json!({"_meta": {crate::mcp::META_SUBSCRIPTION_ID: sub_id}, "notifications": honoured.to_json()});
    let _ = tx.try_send(sse::Frame::message(&jsonrpc::notification_body(
        &Method::SubscriptionsAcknowledged,
        &ack,
    )));
    let Opened {
        revoked,
        server_info,
    } = opened;
    tokio::spawn(async move {
        let mut reach = reach;
        let _want = reach.catalog.hub.want(&principal, &honoured.uris);
        loop {
            let change = tokio::select! {
                _ = tx.closed() => return,
                // At shutdown, or once a reload changed who may authenticate: the listen result,
                // and the client listens again (with credentials that hold).
                _ = ended(&reach, &revoked) => {
                    let result = json!({"resultType": "complete", "_meta": {crate::mcp::META_SUBSCRIPTION_ID: sub_id, crate::mcp::META_SERVER_INFO: server_info}});
                    let _ = tx.send(sse::Frame::message(&jsonrpc::result_body(&id, &result.to_string()))).await;
                    return;
                }
                c = changes.recv() => c,
            };
            reach = reach.latest(); // judged by the config serving now (a reload's included)
            let change = match change {
                Ok(p)
                    if reach.auth.may_reach(&principal, &p.upstream)
                        && views.tell(&reach, &principal, &p) =>
                {
                    p.change
                }
                Ok(_) => continue, // an upstream this principal may not reach, or its view did not change
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if let Some((method, mut params)) = honoured.notification(&change) {
                params.insert(
                    "_meta".into(),
                    json!({crate::mcp::META_SUBSCRIPTION_ID: sub_id}),
                );
                if tx
                    .send(sse::Frame::message(&jsonrpc::notification_body(
                        &method,
                        &Value::Object(params),
                    )))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    rx
}

/// Resolves at shutdown, or once a reload revoked the credentials of the generation `revoked`
/// was taken from.
pub(crate) async fn ended(reach: &Reach, revoked: &tokio_util::sync::CancellationToken) {
    tokio::select! {
        _ = reach.catalog.shutdown.cancelled() => {}
        _ = revoked.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_naming_more_resource_uris_than_the_limit_is_refused() {
        let uris = |n: usize| {
            json!({"resourceSubscriptions": (0..n).map(|i| format!("mock://{i}")).collect::<Vec<_>>()}).to_string()
        };
        assert_eq!(
            Filter::parse(Some(&uris(3)), 3)
                .expect("at the limit")
                .uris
                .len(),
            3
        );
        let err = Filter::parse(Some(&uris(4)), 3).unwrap_err();
        assert!(
            err.contains("limits.max_resource_subscriptions") && err.contains("at most 3"),
            "{err}"
        );
        assert!(!err.contains("mock://"), "no URI in the message: {err}");
    }
}
