//! Shares of the front door's pools (issue 28, class 3: one principal takes what everyone
//! shares), over raw TCP sockets against Sluice in-process:
//!
//! - clients that send a request head and one body byte, then hold the body, take only their
//!   own principal's share of the requests in progress (the rest are refused at once, 503 with
//!   `Retry-After`, naming `limits.max_in_flight_per_principal`); another principal is served
//!   meanwhile; the held ones are answered 408 once `timeouts.body_read_ms` has passed; callers
//!   without a credential are answered 401 before any body is read;
//! - connections past `limits.max_connections_per_source` from one source address (127.0.0.2)
//!   are closed at once while another source (127.0.0.1) is served;
//! - one principal's slow calls to an HTTP upstream with `max_in_flight` hold only its share of
//!   it (`max_in_flight_per_principal`), so another principal's call still reaches it.
//!
//! Waits on events (answers, closes), never on the clock; the 30 s read guard only fails a
//! test that would otherwise hang.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::gateway::{Gateway, Upstream, ALICE_KEY, BOB_KEY};
use crate::support::modern::{self, Reply};
use crate::support::rpc::{body, call, http};

/// How long a test waits for an answer before failing (a guard, not a timing).
pub(super) const GUARD: Duration = Duration::from_secs(30);

/// A mock upstream `alpha` with `echo`.
pub(super) async fn alpha() -> modern::Mock {
    alpha_gated(tokio::sync::watch::channel(true).1).await
}

/// `alpha` whose `slow` answers once `gate` opens.
async fn alpha_gated(gate: tokio::sync::watch::Receiver<bool>) -> modern::Mock {
    let tools = json!([
        modern::tool_args("echo", &["text"]),
        modern::tool_args("slow", &[])
    ]);
    modern::start("alpha", tools, json!([]), move |r| {
        let text = |t: &str| json!({"content": [{"type": "text", "text": t}]});
        match r.params["name"].as_str().unwrap_or("") {
            "slow" => Reply::gate(gate.clone(), text("slow done")),
            _ => Reply::Result(text(r.params["arguments"]["text"].as_str().unwrap_or(""))),
        }
    })
    .await
}

pub(super) fn echo(id: u64) -> Value {
    body(
        id,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "normal"}}),
        json!({}),
    )
}

/// Sluice in front of `upstream` with alice's and bob's keys, audit off, and these keys.
pub(super) fn config(upstream: &str, limits: &[(&str, i64)], timeouts: &[(&str, i64)]) -> Gateway {
    let mut g = Gateway::new()
        .named("shares.toml")
        .set("audit", "enabled", false)
        .timeouts(&[
            ("connect_ms", 500),
            ("refresh_ms", 60_000),
            ("shutdown_ms", 2000),
        ])
        .timeouts(timeouts)
        .two_keys();
    for (k, v) in limits {
        g = g.limit(k, *v);
    }
    g.upstream("alpha", upstream)
}

/// Connects from `from` (an address of this host) to `to`.
async fn connect_from(
    from: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind((from, 0).into())?;
    s.connect(to).await
}

/// Sends a POST head declaring a 200-byte body, then one byte of it, and holds the rest.
async fn hold_body(addr: std::net::SocketAddr, key: Option<&str>) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect to sluice");
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: 200\r\n\r\n{{"
    );
    s.write_all(head.as_bytes())
        .await
        .expect("send the head and one body byte");
    s
}

/// One response read from `s`: its status, its head and its body (up to `Content-Length`).
pub(super) async fn response(s: &mut TcpStream) -> (u16, String, String) {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).into_owned();
                let len = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if got.len() >= end + 4 + len {
                    let status = head
                        .split_whitespace()
                        .nth(1)
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(0);
                    return (
                        status,
                        head,
                        String::from_utf8_lossy(&got[end + 4..end + 4 + len]).into_owned(),
                    );
                }
            }
            let n = s.read(&mut buf).await.expect("read from sluice");
            assert!(
                n > 0,
                "sluice closed the connection without a whole response: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(GUARD, read)
        .await
        .expect("an answer within the test's guard")
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_held_open_by_one_principal_take_only_its_share_and_are_answered_408_while_another_principal_is_served(
) {
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    // Eight requests in progress; under [auth] a principal's share is a quarter: two.
    let gw = config(
        &up.url(),
        &[("max_in_flight", 8)],
        &[("body_read_ms", 1500), ("request_ms", 120_000)],
    )
    .start()
    .await;
    let addr = gw.addr;
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(hold_body(addr, Some(ALICE_KEY)).await);
    }
    let mut anonymous = Vec::new();
    for _ in 0..3 {
        anonymous.push(hold_body(addr, None).await);
    }
    // Without a credential: 401 at once, no body awaited.
    for s in &mut anonymous {
        assert_eq!(
            response(s).await.0,
            401,
            "a caller without a credential is refused before its body is read"
        );
    }
    // Bob is served while alice holds her bodies (on main: 503, alice held every place).
    let bob = call(&http(), &gw.url(), &echo(1), Some(BOB_KEY)).await;
    assert_eq!(bob.status, 200, "another principal is served: {}", bob.text);
    assert_eq!(bob.msg["result"]["content"][0]["text"], "normal");
    // Alice's ten: two within her share wait for their bodies, then 408; eight are refused at once.
    let (mut timed_out, mut refused) = (0, 0);
    for s in &mut held {
        let (status, head, text) = response(s).await;
        match status {
            408 => {
                assert!(text.contains("timeouts.body_read_ms"), "{text}");
                timed_out += 1;
            }
            503 => {
                assert_eq!(
                    header(&head, "retry-after"),
                    Some("1"),
                    "Retry-After on a full share: {head}"
                );
                let msg: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("a JSON-RPC error ({e}): {text}"));
                assert_eq!(msg["error"]["code"], -31020, "{msg}");
                assert_eq!(
                    msg["error"]["data"]["limit"], "limits.max_in_flight_per_principal",
                    "{msg}"
                );
                assert!(
                    msg["error"]["message"]
                        .as_str()
                        .unwrap_or("")
                        .contains("max_in_flight_per_principal = 2"),
                    "{msg}"
                );
                refused += 1;
            }
            other => panic!("a held body was answered {other}: {head}\n{text}"),
        }
    }
    assert_eq!(
        (timed_out, refused),
        (2, 8),
        "alice holds her share (2) and no more"
    );
    // Her share is hers again once they were answered.
    assert_eq!(
        call(&http(), &gw.url(), &echo(2), Some(ALICE_KEY))
            .await
            .status,
        200
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_a_sources_share_are_closed_at_once_and_another_source_is_served() {
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    let limits = [("max_connections", 40), ("max_connections_per_source", 10)];
    let gw = config(&up.url(), &limits, &[("header_read_ms", 25_000)])
        .start()
        .await;
    let other: std::net::IpAddr = "127.0.0.2".parse().unwrap();
    let mut conns = Vec::new();
    for _ in 0..20 {
        conns.push(
            connect_from(other, gw.addr)
                .await
                .expect("connect from 127.0.0.2 (Linux routes all of 127/8 to lo)"),
        );
    }
    // Another source (127.0.0.1) is served on fresh connections meanwhile. Sluice accepts in
    // order, so once these are served it has decided on all twenty before them.
    for i in 0..3 {
        let fresh = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(GUARD)
            .build()
            .unwrap();
        assert_eq!(
            call(&fresh, &gw.url(), &echo(i), Some(BOB_KEY))
                .await
                .status,
            200,
            "another source is served"
        );
    }
    // A connection Sluice closed reads end-of-file (already there); one it holds has nothing.
    let (mut held, mut closed) = (0, 0);
    for c in &mut conns {
        let mut b = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(200), c.read(&mut b)).await {
            Ok(Ok(0)) | Ok(Err(_)) => closed += 1,
            Ok(Ok(_)) => panic!("sluice sent bytes to an idle connection"),
            Err(_) => held += 1,
        }
    }
    assert_eq!(
        (held, closed),
        (10, 10),
        "one source holds its share of the connections, no more"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_slow_calls_hold_only_its_share_of_an_upstreams_max_in_flight_and_another_principal_reaches_it(
) {
    let _measured = crate::support::process::measured().await;
    let (open, gate) = tokio::sync::watch::channel(false);
    let up = alpha_gated(gate).await;
    // max_in_flight = 4 on the upstream: under [auth] one principal's share is one.
    let g = Gateway::new()
        .named("shares.toml")
        .set("audit", "enabled", false)
        .two_keys();
    let gw = g
        .upstream_spec(Upstream::new("alpha", &up.url()).key("max_in_flight", 4))
        .start()
        .await;
    let url = gw.url();
    let done = Arc::new(AtomicUsize::new(0));
    let slow: Vec<_> = (0..4)
        .map(|i| {
            let (url, done) = (url.clone(), done.clone());
            tokio::spawn(async move {
                let a = call(
                    &http(),
                    &url,
                    &body(
                        i,
                        "tools/call",
                        json!({"name": "slow", "arguments": {}}),
                        json!({}),
                    ),
                    Some(ALICE_KEY),
                )
                .await;
                done.fetch_add(1, Ordering::AcqRel);
                a
            })
        })
        .collect();
    // Each of alice's four has reached the upstream or been answered.
    up.until("alice's calls arrived or were refused", |m| {
        m.calls("slow") + done.load(Ordering::Acquire) == 4
    })
    .await;
    // Bob reaches the upstream meanwhile (on main: 503, alice held all four places).
    let bob = call(&http(), &url, &echo(9), Some(BOB_KEY)).await;
    assert_eq!(
        bob.status, 200,
        "another principal reaches the upstream: {}",
        bob.text
    );
    open.send(true).unwrap();
    let mut statuses = Vec::new();
    for t in slow {
        let a = t.await.unwrap();
        if a.status == 503 {
            assert_eq!(
                a.headers.get("retry-after").and_then(|v| v.to_str().ok()),
                Some("1"),
                "{}",
                a.text
            );
            let data = a.refused(503, -31020, "past alice's share of the upstream");
            assert_eq!(
                (data["limit"].as_str(), data["upstream"].as_str()),
                (Some("max_in_flight_per_principal"), Some("alpha")),
                "{data}"
            );
            assert!(
                a.message().contains("max_in_flight_per_principal = 1"),
                "{}",
                a.text
            );
        }
        statuses.push(a.status);
    }
    statuses.sort();
    assert_eq!(
        statuses,
        [200, 503, 503, 503],
        "alice had her share (one call) under way, no more"
    );
    gw.stop().await;
}
