//! A continuation that reached the wrong replica goes on to its owner.
//!
//! Takes the owner's id (from a sealed state that opened here, or a bridge B id), the client's
//! request (method, carried headers, body) and the principal this replica authenticated; gives
//! the owner's answer as this client's reply: JSON with its status (and `Retry-After`), 202, or
//! an SSE stream relayed event by event (the client going away drops the relay, which closes
//! the connection to the owner, which ends the call there as a client's disconnect would).
//! Refuses with `owner_gone` (`-32602`) an owner whose id does not meet `cluster.id`'s grammar
//! (never looked up or logged), that is not registered or cannot be connected to within
//! `timeouts.connect_ms`, that refuses the forward (401: keys or clocks differ; 403: not a
//! continuation it owns), or whose stream breaks mid-answer; with `-31019` a lookup while
//! Redis is unreachable and no address is known.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use tokio::sync::mpsc;

use crate::auth::Principal;
use crate::cluster::Cluster;
use crate::error::GatewayError;
use crate::mcp::sse;
use crate::respond::Reply;
use crate::state::StateError;
use crate::upstream::client::{Answer, HttpClient};

tokio::task_local! {
    /// Set while a forwarded request runs: it is never forwarded again (two replicas that
    /// disagree about who owns what cannot bounce a request between them).
    static FORWARDED: ();
}

/// Runs `fut` (a request another replica forwarded) marked as forwarded.
pub async fn as_forwarded<F: std::future::Future>(fut: F) -> F::Output {
    FORWARDED.scope((), fut).await
}

/// Whether the current request came from another replica.
pub fn is_forwarded() -> bool {
    FORWARDED.try_with(|_| ()).is_ok()
}

/// The internal listener's one path.
pub const PATH: &str = "/internal/v1/mcp";

fn gone() -> GatewayError {
    let e = StateError::OwnerGone;
    GatewayError::InvalidParams(
        e.to_string(),
        Some(serde_json::json!({"reason": e.reason()})),
    )
}

/// One request to forward.
pub struct Forward<'a> {
    /// The replica that holds the exchange or the session (a sealed state's owner, or the
    /// replica a bridge B answer's id names); refused unless it meets `cluster.id`'s grammar.
    pub owner: &'a str,
    /// The client's HTTP method.
    pub method: http::Method,
    /// The client's headers (only [`crate::cluster::peer::carried`] ones go on).
    pub headers: &'a HeaderMap,
    /// The principal this replica authenticated.
    pub principal: &'a Principal,
    /// The body as the client sent it.
    pub body: Bytes,
    /// The JSON-RPC id, for an error sent in-stream (`null` for none).
    pub id: &'a str,
}

impl Cluster {
    /// Sends `f` to its owner and gives the owner's answer.
    pub async fn forward(
        &self,
        client: &HttpClient,
        keys: &crate::state::Keys,
        f: Forward<'_>,
    ) -> Result<Reply, GatewayError> {
        let count = |i: usize| self.forwarded[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Used as a Redis key, a lookup and a log field: only a name that meets the grammar.
        let Some(owner) = crate::config::replica::ReplicaId::parse(f.owner) else {
            count(1);
            tracing::warn!("a continuation names an owner that is not a replica id; not forwarded");
            return Err(gone());
        };
        if is_forwarded() {
            count(1);
            tracing::warn!(owner = %owner, "a forwarded request names yet another owner; not forwarded again (are two replicas configured with one cluster.id?)");
            return Err(gone());
        }
        let url = match self.locate(owner.as_str()).await {
            Ok(Some(url)) => url,
            Ok(None) => {
                count(1);
                tracing::info!(owner = %owner, "continuation for a replica that is not registered (gone)");
                return Err(gone());
            }
            Err(_) => return Err(GatewayError::Refused(crate::policy::Refusal::SharedState)),
        };
        let uri: http::Uri = format!("{}{PATH}", url.trim_end_matches('/'))
            .parse()
            .map_err(|_| gone())?;
        let headers = self.signed_headers(keys, owner.as_str(), &f);
        let sent = client
            .send(f.method, "replica", &uri, headers, f.body, None)
            .await;
        let (head, answer) = match sent {
            Ok(x) => x,
            Err(e) => {
                count(1);
                tracing::warn!(owner = %owner, error = %crate::escape::Escaped(&e), "the replica holding a continuation could not be reached");
                return Err(gone());
            }
        };
        count(0);
        Ok(match answer {
            Answer::Json(status, body) => match retry_after(&head) {
                Some(secs) => Reply::Limited(status, body, secs),
                None => Reply::Json(status, body),
            },
            Answer::Status(StatusCode::ACCEPTED, _) => Reply::Accepted,
            Answer::Status(StatusCode::UNAUTHORIZED, _) => {
                tracing::error!(owner = %owner, "another replica refused this one's forward: the state keys differ, the clocks are more than 30 s apart, it runs another version of Sluice (run one version on every replica), or it was taken for a replay");
                return Err(gone());
            }
            Answer::Status(StatusCode::FORBIDDEN, _) => {
                tracing::error!(owner = %owner, "another replica refused this one's forward as not a continuation it owns: do two replicas share one cluster.id, or run different versions?");
                return Err(gone());
            }
            Answer::Status(StatusCode::NOT_FOUND, _) => Reply::Plain(
                StatusCode::NOT_FOUND,
                "not found: no such session (it ended, or was never opened)\n",
            ),
            Answer::Status(status, body) => Reply::Json(status, body),
            Answer::Sse(stream) => Reply::Sse(relay(stream, f.id.to_owned()).into()),
        })
    }

    /// The headers a forward to `owner` goes with: the client's [`crate::cluster::peer::carried`] ones,
    /// then the peer head signed over them, the request and its body, at this moment.
    fn signed_headers(&self, keys: &crate::state::Keys, owner: &str, f: &Forward<'_>) -> HeaderMap {
        let mut headers: HeaderMap = f
            .headers
            .iter()
            .filter(|(k, _)| crate::cluster::peer::carried(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let signed = crate::cluster::peer::Forwarded {
            from: self.id(),
            to: owner,
            method: &f.method,
            path: PATH,
            body: &f.body,
        };
        crate::cluster::peer::sign(
            keys,
            &signed,
            f.principal,
            crate::state::now_ms(),
            &mut headers,
        );
        headers
    }
}

fn retry_after(h: &HeaderMap) -> Option<u64> {
    h.get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Relays the owner's events to the client; a stream that breaks ends with `owner_gone`.
fn relay(mut stream: crate::upstream::client::Messages, id: String) -> mpsc::Receiver<sse::Frame> {
    let (tx, rx) = mpsc::channel(64);
    crate::audit::spawn(async move {
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                _ = tx.closed() => return,
            };
            match next {
                Ok(Some(m)) => {
                    if tx
                        .send(sse::Frame::message(m.text().as_bytes()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    let (_, code, data) = gone().classify();
                    let body = crate::mcp::jsonrpc::error_body(
                        &id,
                        code,
                        &StateError::OwnerGone.to_string(),
                        data.as_ref(),
                    );
                    let _ = tx.send(sse::Frame::message(&body)).await;
                    return;
                }
            }
        }
    });
    rx
}
