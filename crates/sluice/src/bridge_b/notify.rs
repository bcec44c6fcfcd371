//! A legacy session's stream of notifications unrelated to a request: the list changes of
//! Sluice's listen streams and `notifications/resources/updated` for the URIs the session
//! subscribed to, on its standalone GET stream (Streamable HTTP) or its one stream (the
//! 2024-11-05 HTTP+SSE transport).
//!
//! Takes the session, its principal and the stream's sender; gives the notifications the
//! principal may see (its upstreams, its visibility rules). Ends (dropping its sender) when the
//! stream closes, the session ends (its `ended` token), Sluice shuts down, or a reload changed
//! who may authenticate. Bounded: it waits for room in the stream's channel (a slow reader
//! drops the broadcast changes it lags behind, never grows a queue); with a keep-alive, one
//! comment per period, which also keeps the session from expiring while its stream is open.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::LegacySession;
use crate::auth::Principal;
use crate::catalog::hub::Published;
use crate::gateway::Generation;
use crate::mcp::sse::Frame;

/// The views and the subscription, taken when the stream opens (before its answer goes out).
pub(super) struct Watch {
    gw: Arc<Generation>,
    principal: Principal,
    views: crate::listen::view::Views,
    changes: broadcast::Receiver<Published>,
}

impl Watch {
    /// With visibility rules, only changes to what this principal sees (listen/view.rs); the
    /// views are taken before subscribing, so no change falls between them.
    pub(super) fn start(gw: &Arc<Generation>, principal: &Principal) -> Watch {
        let views = crate::listen::view::Views::start(&gw.reach, principal);
        let changes = gw.rt.hub.subscribe();
        Watch {
            gw: gw.clone(),
            principal: principal.clone(),
            views,
            changes,
        }
    }

    /// Sends the session's notifications on `tx` until it ends (see the module's head);
    /// `keep_alive`: a comment every period, each one touching the session (so it does not
    /// expire while its stream is open) and ending the stream if the session is gone.
    pub(super) async fn run(
        self,
        s: Arc<LegacySession>,
        tx: mpsc::Sender<Frame>,
        keep_alive: Option<Duration>,
    ) {
        let Watch {
            mut gw,
            principal,
            mut views,
            mut changes,
        } = self;
        let revoked = gw.revoked.clone();
        let want = gw.rt.hub.want(&principal, &s.subscriptions());
        let mut tick =
            keep_alive.map(|p| tokio::time::interval_at(tokio::time::Instant::now() + p, p));
        loop {
            let change = tokio::select! {
                _ = tx.closed() => break,
                _ = s.ended.cancelled() => break,
                // At shutdown, or once a reload changed who may authenticate.
                _ = crate::listen::ended(&gw.reach, &revoked) => break,
                _ = async {
                    match tick.as_mut() {
                        Some(t) => t.tick().await,
                        None => std::future::pending().await,
                    }
                } => {
                    // Never waits: a full queue has something to send already.
                    let closed = matches!(tx.try_send(Frame::Comment("keep-alive")), Err(mpsc::error::TrySendError::Closed(_)));
                    if closed || gw.rt.legacy_sessions.get(&s.id, &s.principal).is_none() {
                        break;
                    }
                    continue;
                }
                c = changes.recv() => c,
            };
            gw = gw.latest(); // judged by the config serving now (a reload's included)
            let change = match change {
                Ok(p)
                    if !gw.auth.may_reach(&principal, &p.upstream)
                        || !views.tell(&gw.reach, &principal, &p) =>
                {
                    continue
                }
                Ok(p) => Ok(p.change),
                Err(e) => Err(e),
            };
            let msg = match change {
                Ok(crate::listen::Change::Updated(u)) if !s.is_subscribed(&u) => continue,
                Ok(c) => {
                    let (method, params) = c.notification();
                    let mut m = json!({"jsonrpc": "2.0", "method": method.as_str()});
                    if !params.is_empty() {
                        m["params"] = Value::Object(params);
                    }
                    m
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => break,
            };
            if tx
                .send(Frame::message(msg.to_string().as_bytes()))
                .await
                .is_err()
            {
                break;
            }
        }
        drop(want);
    }
}
