//! Calls held for an operator's approval (issue 33 item 3): an `approver = "operator"` rule
//! holds a tool call on an SSE stream that says it waits, until an operator approves it
//! (the call runs), denies it (`-31051`) or the wait ends (`-31052`); for a 2026-07-28 client
//! with a `progressToken`, a 2026-07-28 client with no capability at all (a batch agent), and
//! a 2025-11-25 client through bridge B. The operator decides through the admin route
//! (`sluice::admin::approvals::route`, called directly). No argument value but those the rule
//! shows reaches the listing, the events, the webhook or the logs.

use futures_util::StreamExt;
use http::Method;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sluice::admin::{Cx, Operator};
use sluice::events::Kind;
use sluice::Running;
use tokio::sync::broadcast;

use crate::support::call::{http, Call};
use crate::support::gateway::Gateway;
use crate::support::legacy_client::Legacy;
use crate::support::{logs, unique, WAIT};

const RULE: &str = "[[rule]]\nname = \"ops\"\nmatch = { method = [\"tools/call\"], tool = [\"echo\"] }\neffect = \"approve\"\napprover = \"operator\"\nshow_arguments = [\"ticket_id\"]\n";
const WAITING: &str = "waiting for approval by an operator";

/// The clients of the matrix.
#[derive(Clone, Copy, Debug)]
enum Client {
    /// 2026-07-28, every capability, a `progressToken`.
    Modern,
    /// 2026-07-28, no capability (no elicitation, no tasks), no `progressToken`.
    Bare,
    /// 2025-11-25 through bridge B, no capability, a `progressToken`.
    Legacy,
}

async fn gateway(wait_ms: i64, extra: impl FnOnce(Gateway) -> Gateway) -> (impl Sized, Running) {
    let demo = sluice_testkit::demo::upstream::start("demo", ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream starts");
    let g = Gateway::e2e()
        .upstream("demo", &demo.url())
        .policy(RULE)
        .set("approvals", "wait_ms", wait_ms)
        .set("approvals", "progress_ms", 100);
    let running = extra(g).start().await;
    (demo, running)
}

fn cx(sluice: &Running, op: &str) -> Cx {
    Cx {
        gw: sluice.gateway.clone(),
        op: Operator {
            name: op.to_owned(),
            via: "key",
        },
    }
}

/// An admin request through the approvals route: (status, JSON).
async fn admin(sluice: &Running, op: &str, method: Method, rest: &[&str]) -> (u16, Value) {
    let answer = sluice::admin::approvals::route(&cx(sluice, op), &method, rest, b"").await;
    let status = answer.status().as_u16();
    let body = answer.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&body).expect("admin JSON"))
}

/// The next `approval` event in `state`.
async fn next_approval(rx: &mut broadcast::Receiver<sluice::events::Event>, state: &str) -> Value {
    tokio::time::timeout(WAIT, async {
        loop {
            let e = rx.recv().await.expect("event bus open");
            if e.kind == Kind::Approval && e.data["state"] == state {
                return e.data;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no approval event {state:?} within {WAIT:?}"))
}

/// A held call's response, read as it comes.
struct Raw {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    text: String,
}

impl Raw {
    fn of(resp: reqwest::Response) -> Raw {
        assert_eq!(resp.status(), 200, "a held call is answered 200 on SSE");
        let ctype = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        assert!(
            ctype.starts_with("text/event-stream"),
            "held on SSE, not {ctype}"
        );
        Raw {
            body: Box::pin(resp.bytes_stream()),
            text: String::new(),
        }
    }

    /// Reads until the text holds `needle`.
    async fn until(&mut self, needle: &str) {
        tokio::time::timeout(WAIT, async {
            while !self.text.contains(needle) {
                match self.body.next().await {
                    Some(Ok(c)) => self.text.push_str(&String::from_utf8_lossy(&c)),
                    _ => panic!("the stream ended before {needle:?}: {}", self.text),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {needle:?} within {WAIT:?}: {}", self.text));
    }

    /// Reads to the end; gives the last message.
    async fn last(mut self) -> (String, Value) {
        tokio::time::timeout(WAIT, async {
            while let Some(Ok(c)) = self.body.next().await {
                self.text.push_str(&String::from_utf8_lossy(&c));
            }
        })
        .await
        .expect("the held call's stream ends");
        let last = self
            .text
            .lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .unwrap_or_else(|| panic!("no message: {}", self.text))
            .to_owned();
        let v = serde_json::from_str(&last).expect("a JSON message");
        (self.text, v)
    }
}

/// Sends the call for `client`; gives its open response.
async fn open(sluice: &Running, client: Client, args: &Value) -> Raw {
    let url = sluice.url();
    let resp = match client {
        Client::Modern => {
            let call = Call::new("echo", args.clone());
            let mut body = call.body(json!({}));
            body["params"]["_meta"]["progressToken"] = json!("tok-1");
            http()
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "echo")
                .body(body.to_string())
                .send()
                .await
                .expect("POST")
        }
        Client::Bare => Call::new("echo", args.clone())
            .caps(json!({}))
            .request(&http(), &url, json!({}))
            .send()
            .await
            .expect("POST"),
        Client::Legacy => {
            let mut l = Legacy::new(&url);
            l.initialize(json!({})).await;
            l.post(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "echo", "arguments": args, "_meta": {"progressToken": "tok-legacy"}}}))
                .await
        }
    };
    Raw::of(resp)
}

/// What the stream says while it waits, for `client`.
fn waiting_mark(client: Client) -> &'static str {
    match client {
        Client::Bare => ": waiting for approval by an operator",
        _ => "notifications/progress",
    }
}

const CLIENTS: [Client; 3] = [Client::Modern, Client::Bare, Client::Legacy];

#[tokio::test]
async fn an_operator_approves_a_held_call_and_it_runs_for_every_client() {
    let canary = unique("held-arg");
    let (_demo, sluice) = gateway(60_000, |g| g).await;
    let mut events = sluice.gateway.rt.events.subscribe();
    let mut seen = Vec::new();
    for client in CLIENTS {
        let args = json!({"text": canary, "ticket_id": "T-42"});
        let mut raw = open(&sluice, client, &args).await;
        let held = next_approval(&mut events, "held").await;
        let id = held["id"].as_str().expect("an id").to_owned();
        raw.until(waiting_mark(client)).await;
        assert!(raw.text.contains(WAITING), "{client:?}: {}", raw.text);
        let (status, list) = admin(&sluice, "alice", Method::GET, &[]).await;
        assert_eq!(status, 200);
        let entry = &list["approvals"][0];
        assert_eq!(
            (
                &entry["id"],
                &entry["tool"],
                &entry["upstream"],
                &entry["argument_keys"],
                &entry["shown"]
            ),
            (
                &json!(id),
                &json!("echo"),
                &json!("demo"),
                &json!(["text", "ticket_id"]),
                &json!({"ticket_id": "T-42"})
            ),
            "{client:?}: {list}"
        );
        assert!(entry["expires_at_ms"].as_u64() > entry["held_at_ms"].as_u64());
        let (status, decided) =
            admin(&sluice, "alice", Method::POST, &[id.as_str(), "approve"]).await;
        assert_eq!(
            (status, &decided),
            (
                200,
                &json!({"id": id, "decision": "approved", "operator": "alice"})
            )
        );
        let (status, again) = admin(&sluice, "bob", Method::POST, &[id.as_str(), "deny"]).await;
        assert_eq!(
            (status, &again["error"]["code"]),
            (409, &json!("already_decided"))
        );
        let (text, last) = raw.last().await;
        assert_eq!(
            last["id"],
            if matches!(client, Client::Legacy) {
                json!(7)
            } else {
                json!(1)
            }
        );
        let out = last["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            out.contains(&canary),
            "{client:?}: the approved call ran: {text}"
        );
        let approved = next_approval(&mut events, "approved").await;
        assert_eq!(approved["operator"], "alice");
        seen.push(held.to_string());
        seen.push(approved.to_string());
        seen.push(list.to_string());
    }
    let (status, _) = admin(&sluice, "alice", Method::POST, &["0123", "approve"]).await;
    assert_eq!(status, 404);
    // The canary: no argument value but the shown one left the call.
    for s in &seen {
        assert!(!s.contains(&canary), "an argument value leaked: {s}");
    }
    assert!(
        !logs::contains(&canary),
        "an argument value reached the logs"
    );
}

#[tokio::test]
async fn an_operator_denies_a_held_call_and_it_never_runs_for_every_client() {
    let (_demo, sluice) = gateway(60_000, |g| g).await;
    let mut events = sluice.gateway.rt.events.subscribe();
    for client in CLIENTS {
        let mut raw = open(&sluice, client, &json!({"text": "no", "ticket_id": "T-1"})).await;
        let id = next_approval(&mut events, "held").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        raw.until(waiting_mark(client)).await;
        let (status, d) = admin(&sluice, "carol", Method::POST, &[id.as_str(), "deny"]).await;
        assert_eq!((status, &d["decision"]), (200, &json!("denied")));
        let (text, last) = raw.last().await;
        assert_eq!(last["error"]["code"], -31051, "{client:?}: {text}");
        assert_eq!(last["error"]["data"]["rule"], "ops");
        let msg = last["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("an operator denied") && !msg.contains("carol"),
            "{msg}"
        );
        assert!(last.get("result").is_none());
    }
}

#[tokio::test]
async fn a_held_call_no_operator_decides_ends_with_its_own_code_for_every_client() {
    let (_demo, sluice) = gateway(1_000, |g| g).await;
    let mut events = sluice.gateway.rt.events.subscribe();
    for client in CLIENTS {
        let raw = open(&sluice, client, &json!({"text": "late"})).await;
        let id = next_approval(&mut events, "held").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (text, last) = raw.last().await;
        assert_eq!(last["error"]["code"], -31052, "{client:?}: {text}");
        assert_eq!(last["error"]["data"]["waitMs"], 1000);
        assert_eq!(next_approval(&mut events, "expired").await["id"], json!(id));
        let (status, e) = admin(&sluice, "alice", Method::POST, &[id.as_str(), "approve"]).await;
        assert_eq!((status, &e["error"]["code"]), (404, &json!("not_found")));
    }
}

#[tokio::test]
async fn held_calls_past_the_principals_cap_are_refused() {
    let (_demo, sluice) =
        gateway(60_000, |g| g.set("approvals", "max_held_per_principal", 1)).await;
    let mut events = sluice.gateway.rt.events.subscribe();
    let first = open(&sluice, Client::Bare, &json!({"text": "a"})).await;
    let id = next_approval(&mut events, "held").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = Call::new("echo", json!({"text": "b"}))
        .caps(json!({}))
        .send(&http(), &sluice.url(), json!({}))
        .await;
    assert_eq!(
        (second.status, &second.msg["error"]["code"]),
        (429, &json!(-31053)),
        "{}",
        second.msg
    );
    admin(&sluice, "alice", Method::POST, &[id.as_str(), "approve"]).await;
    let (_, last) = first.last().await;
    assert!(last.get("result").is_some(), "{last}");
}

/// HMAC-SHA256 from its definition (RFC 2104), to check Sluice's signature independently.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> String {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// A webhook receiver: answers 500 to its first request and 200 after; sends on each
/// request's signature header and body.
async fn receiver() -> (String, tokio::sync::mpsc::Receiver<(String, Vec<u8>)>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head, len) = loop {
                let k = sock.read(&mut chunk).await.unwrap_or(0);
                if k == 0 {
                    break (String::new(), 0);
                }
                buf.extend_from_slice(&chunk[..k]);
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    buf.drain(..end + 4);
                    break (head, len);
                }
            };
            while buf.len() < len {
                let k = sock.read(&mut chunk).await.unwrap_or(0);
                if k == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..k]);
            }
            let sig = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("sluice-signature")
                        .then(|| v.trim().to_owned())
                })
                .unwrap_or_default();
            let status = if n == 0 {
                "500 Internal Server Error"
            } else {
                "200 OK"
            };
            let _ = sock
                .write_all(
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await;
            let _ = tx.send((sig, buf)).await;
        }
    });
    (url, rx)
}

#[tokio::test]
async fn each_held_call_is_announced_to_the_webhook_signed_and_retried_without_its_values() {
    const SECRET_ENV: &str = "SLUICE_TEST_APPROVALS_WEBHOOK_SECRET";
    const SECRET: &str = "webhook-secret-for-the-approvals-test";
    std::env::set_var(SECRET_ENV, SECRET);
    let (url, mut got) = receiver().await;
    let canary = unique("webhook-arg");
    let (_demo, sluice) = gateway(60_000, |g| {
        g.set("approvals.webhook", "url", url.as_str()).set(
            "approvals.webhook",
            "secret_env",
            SECRET_ENV,
        )
    })
    .await;
    let mut events = sluice.gateway.rt.events.subscribe();
    let raw = open(
        &sluice,
        Client::Bare,
        &json!({"text": canary, "ticket_id": "T-9"}),
    )
    .await;
    let id = next_approval(&mut events, "held").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut tries = Vec::new();
    for _ in 0..2 {
        tries.push(
            tokio::time::timeout(WAIT, got.recv())
                .await
                .expect("a webhook try")
                .expect("receiver"),
        );
    }
    for (sig, body) in &tries {
        let (t, v1) = sig
            .strip_prefix("t=")
            .and_then(|s| s.split_once(",v1="))
            .unwrap_or_else(|| panic!("Sluice-Signature reads t=…,v1=…: {sig:?}"));
        let mut signed = format!("{t}.").into_bytes();
        signed.extend_from_slice(body);
        assert_eq!(
            v1,
            hmac_sha256(SECRET.as_bytes(), &signed),
            "the signature verifies"
        );
        let notice: Value = serde_json::from_slice(body).expect("a JSON notice");
        assert_eq!(
            (
                &notice["id"],
                &notice["tool"],
                &notice["upstream"],
                &notice["argument_keys"]
            ),
            (
                &json!(id),
                &json!("echo"),
                &json!("demo"),
                &json!(["text", "ticket_id"])
            )
        );
        assert!(notice["expires_at_ms"].as_u64().is_some());
        let text = String::from_utf8_lossy(body);
        assert!(
            !text.contains(&canary) && !text.contains("T-9"),
            "no argument value: {text}"
        );
    }
    admin(&sluice, "alice", Method::POST, &[id.as_str(), "approve"]).await;
    let (_, last) = raw.last().await;
    assert!(last.get("result").is_some(), "{last}");
}
