//! `[approvals.webhook]`: a signed notice of each held call, sent off the call's path.
//!
//! Takes a held call; gives one JSON POST to the configured URL (`id`, `method`, `tool`,
//! `upstream`, `principal`, `argument_keys`, `held_at_ms`, `expires_at_ms`, `replica`: never
//! an argument value, shown or not), signed in `Sluice-Signature: t=<Unix s>,v1=<hex>` where
//! `v1` is HMAC-SHA256 with the secret over `<t>.<body>`. Tries [`TRIES`] times, [`BACKOFF`]
//! then twice that apart, until a 2xx; never holds the call up. Refuses (drops, with a warning)
//! a notice past [`MAX_SENDING`] under way.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use super::Held;
use crate::upstream::client::{Answer, HttpClient};

/// How many times a notice is tried.
pub const TRIES: u32 = 3;
/// The wait before the second try (doubled before the third).
pub const BACKOFF: Duration = Duration::from_millis(500);
/// The most notices under way at once.
pub const MAX_SENDING: usize = 64;
/// The signature header.
pub const HEADER: &str = "sluice-signature";

/// Sends notices to one webhook.
#[derive(Clone)]
pub struct Sender {
    url: http::Uri,
    secret: Arc<str>,
    client: HttpClient,
    sending: Arc<tokio::sync::Semaphore>,
}

impl Sender {
    /// A sender for `cfg` over `client`.
    pub fn new(cfg: &crate::config::Webhook, client: HttpClient) -> Option<Sender> {
        static SENDING: std::sync::LazyLock<Arc<tokio::sync::Semaphore>> =
            std::sync::LazyLock::new(|| Arc::new(tokio::sync::Semaphore::new(MAX_SENDING)));
        Some(Sender {
            url: cfg.url.parse().ok()?,
            secret: cfg.secret.as_str().into(),
            client,
            sending: SENDING.clone(),
        })
    }

    /// Sends the notice of `held` in the background.
    pub fn notify(&self, held: &Held) {
        let Ok(permit) = self.sending.clone().try_acquire_owned() else {
            tracing::warn!("approvals webhook: too many notices under way; this one is dropped");
            return;
        };
        let body = Bytes::from(notice(held).to_string());
        let me = self.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut wait = BACKOFF;
            for attempt in 1..=TRIES {
                match me.send_once(&body).await {
                    Ok(()) => return,
                    Err(status) => {
                        tracing::warn!(attempt, status, "approvals webhook: notice not taken")
                    }
                }
                if attempt < TRIES {
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
            }
        });
    }

    async fn send_once(&self, body: &Bytes) -> Result<(), u16> {
        let t = crate::state::now_ms() / 1000;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        let sig = format!("t={t},v1={}", sign(&self.secret, t, body));
        if let Ok(v) = http::HeaderValue::from_str(&sig) {
            headers.insert(HEADER, v);
        }
        if let Some(host) = self.url.authority() {
            if let Ok(v) = http::HeaderValue::from_str(host.as_str()) {
                headers.insert(http::header::HOST, v);
            }
        }
        match self
            .client
            .post("approvals-webhook", &self.url, headers, body.clone(), None)
            .await
        {
            Ok(Answer::Json(s, _) | Answer::Status(s, _)) if s.is_success() => Ok(()),
            Ok(Answer::Sse(_)) => Ok(()),
            Ok(Answer::Json(s, _) | Answer::Status(s, _)) => Err(s.as_u16()),
            Err(_) => Err(0),
        }
    }
}

/// The notice of a held call: names and argument keys only.
pub fn notice(held: &Held) -> serde_json::Value {
    json!({
        "type": "approval.held",
        "id": held.id, "method": held.method, "tool": held.tool, "upstream": held.upstream,
        "principal": held.principal, "argument_keys": held.argument_keys,
        "held_at_ms": held.held_at_ms, "expires_at_ms": held.expires_at_ms, "replica": held.replica,
    })
}

/// `v1`: lowercase hex of HMAC-SHA256(secret, "<t>.<body>").
pub fn sign(secret: &str, t: u64, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    crate::state::hex(&mac.finalize().into_bytes())
}
