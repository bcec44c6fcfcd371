//! Hardening bounds (issue 5 item 5): each bound gives its documented answer while a normal
//! client keeps being served.
//!
//! - slowloris: a client that sends part of a request head, one that sends nothing, and one
//!   that sends part of the HTTP/2 preface are each closed after `timeouts.header_read_ms`;
//! - a 20 MiB body gets 413 (declared with Content-Length, and streamed chunked);
//! - a flood past `limits.max_in_flight` gets 503 with `Retry-After`;
//! - a request head over `limits.max_header_bytes` gets 431;
//! - thousands of idle connections opened by a separate process (tests/peers/hold_connections.py,
//!   which raises RLIMIT_NOFILE as far as the hard limit allows) are held while a normal request
//!   succeeds; past `limits.max_connections` new connections are closed at once; under 30 s;
//! - graceful shutdown: SIGTERM to the `sluice` binary mid-stream lets the in-flight response
//!   finish, then the process exits 0 (style rule 25);
//! - an upstream's oversized answer (JSON body or SSE event) is a 502 naming the upstream.
//!
//! Everything binds 127.0.0.1 port 0; timeouts are milliseconds; no test sleeps longer than 2 s.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::gateway::Gateway;
use crate::support::modern::{self, Reply};
use crate::support::peers::hold_connections;
use crate::support::process::{Env, Sluice};
use crate::support::rpc::{body, call, http, request, send};

/// A mock upstream `alpha`: `echo`; `slow` answers once `gate` opens; `huge` answers a 256 KiB
/// result; `huge_event` streams a 256 KiB SSE event; `stream` sends a progress notification, then
/// its result 700 ms later.
async fn alpha() -> modern::Mock {
    alpha_gated(tokio::sync::watch::channel(true).1).await
}

async fn alpha_gated(gate: tokio::sync::watch::Receiver<bool>) -> modern::Mock {
    let tools = json!([
        modern::tool_args("echo", &["text"]),
        modern::tool_args("slow", &[]),
        modern::tool_args("huge", &[]),
        modern::tool_args("huge_event", &[]),
        modern::tool_args("stream", &[])
    ]);
    modern::start("alpha", tools, json!([]), move |r| {
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        match r.params["name"].as_str().unwrap_or("") {
            "echo" => Reply::Result(text(r.params["arguments"]["text"].as_str().unwrap_or("").to_owned())),
            "slow" => Reply::gate(gate.clone(), text("slow done".into())),
            "huge" => Reply::Result(text("x".repeat(256 << 10))),
            "huge_event" => modern::stream(vec![(
                Duration::ZERO,
                json!({"jsonrpc": "2.0", "id": r.id, "result": {"resultType": "complete", "content": [{"type": "text", "text": "y".repeat(256 << 10)}]}}),
            )]),
            "stream" => {
                let token = r.params["_meta"]["progressToken"].clone();
                modern::stream(vec![
                    (Duration::ZERO, json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 2}})),
                    (Duration::from_millis(700), json!({"jsonrpc": "2.0", "id": r.id, "result": {"resultType": "complete", "content": [{"type": "text", "text": "stream done"}]}})),
                ])
            }
            _ => Reply::Error(200, -32602, "unknown tool"),
        }
    })
    .await
}

/// Sluice's config in front of `upstream` (audit off, short timeouts), with these `[limits]`
/// and `[timeouts]` keys.
fn config(upstream: &str, limits: &[(&str, i64)], timeouts: &[(&str, i64)]) -> Gateway {
    let mut g = Gateway::new()
        .named("hardening.toml")
        .set("audit", "enabled", false)
        .timeouts(&[
            ("connect_ms", 500),
            ("refresh_ms", 60_000),
            ("shutdown_ms", 2000),
        ])
        .timeouts(timeouts);
    for (k, v) in limits {
        g = g.limit(k, *v);
    }
    g.upstream("alpha", upstream)
}

async fn gateway(
    upstream: &str,
    limits: &[(&str, i64)],
    timeouts: &[(&str, i64)],
) -> sluice::Running {
    config(upstream, limits, timeouts).start().await
}

fn echo(id: u64) -> Value {
    body(
        id,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "normal"}}),
        json!({}),
    )
}

/// A normal client calling `echo` every 50 ms until stopped; counts successes and failures.
struct Normal {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<std::sync::Mutex<Vec<String>>>,
    /// Notified after each call.
    called: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Normal {
    fn start(url: String) -> Normal {
        let (stop, ok, failed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(std::sync::Mutex::new(Vec::new())),
        );
        let called = Arc::new(tokio::sync::Notify::new());
        let (s, o, f, c) = (stop.clone(), ok.clone(), failed.clone(), called.clone());
        let task = tokio::spawn(async move {
            // A new connection per call: hyper's header-read timer also runs on an idle
            // keep-alive connection, so a pooled one could be closed just as it is reused.
            let h = reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .pool_max_idle_per_host(0)
                .build()
                .expect("reqwest client");
            let mut i = 0;
            while !s.load(Ordering::Relaxed) {
                i += 1;
                let a = call(&h, &url, &echo(i), None).await;
                if a.status == 200 && a.msg["result"]["content"][0]["text"] == "normal" {
                    o.fetch_add(1, Ordering::Relaxed);
                } else {
                    f.lock().unwrap().push(format!("{} {}", a.status, a.text));
                }
                c.notify_waiters();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Normal {
            stop,
            ok,
            failed,
            called,
            task,
        }
    }

    /// Waits (at most 2 s) until it was served `min` times, stops, and asserts it was served
    /// every time.
    async fn served(self, min: usize) {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let called = self.called.notified();
            if self.ok.load(Ordering::Relaxed) >= min || !self.failed.lock().unwrap().is_empty() {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, called).await.is_err() {
                break;
            }
        }
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("normal client task");
        let failed = self.failed.lock().unwrap().clone();
        assert!(
            failed.is_empty(),
            "the normal client was refused: {failed:?}"
        );
        let ok = self.ok.load(Ordering::Relaxed);
        assert!(
            ok >= min,
            "the normal client was served {ok} times, expected at least {min}"
        );
    }
}

/// Reads until the server closes the connection; gives what it sent and when it closed, on
/// tokio's clock (Sluice's, paused or not).
async fn until_closed(mut s: TcpStream, limit: Duration) -> (String, Duration) {
    let started = tokio::time::Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit.saturating_sub(started.elapsed()), s.read(&mut buf)).await
        {
            Err(_) => panic!(
                "the connection was still open after {limit:?}; it sent {:?}",
                String::from_utf8_lossy(&got)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&got).into_owned(),
                    started.elapsed(),
                )
            }
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn slowloris_clients_are_closed_after_the_header_read_timeout() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    let gw = gateway(&up.url(), &[], &[("header_read_ms", 300)]).await;
    // Paused: hyper's header-read timer (a tokio timer) fires as soon as everything waits on it.
    tokio::time::pause();
    let normal = Normal::start(gw.url());
    let partial_head = async {
        let mut s = TcpStream::connect(gw.addr).await.unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
            .await
            .unwrap();
        until_closed(s, Duration::from_secs(2)).await
    };
    let silent = async {
        until_closed(
            TcpStream::connect(gw.addr).await.unwrap(),
            Duration::from_secs(2),
        )
        .await
    };
    let partial_h2 = async {
        let mut s = TcpStream::connect(gw.addr).await.unwrap();
        s.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
        until_closed(s, Duration::from_secs(2)).await
    };
    let (a, b, c) = tokio::join!(partial_head, silent, partial_h2);
    for (what, (sent, after)) in [
        ("a partial request head", a),
        ("a silent connection", b),
        ("a partial HTTP/2 preface", c),
    ] {
        assert!(
            after >= Duration::from_millis(250),
            "{what} was closed after {after:?}, before header_read_ms"
        );
        assert!(
            sent.is_empty() || sent.starts_with("HTTP/1.1 408"),
            "{what}: the server sent {sent:?}"
        );
    }
    normal.served(5).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_20_mib_body_gets_413_declared_or_streamed() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    let gw = gateway(&up.url(), &[], &[]).await;
    let normal = Normal::start(gw.url());
    const SIZE: usize = 20 << 20;
    // Declared: refused from the Content-Length alone, before any of the body is read.
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {SIZE}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&vec![b' '; 64 << 10]).await.unwrap();
    let mut first = vec![0u8; 12];
    tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut first))
        .await
        .expect("an answer within 2 s")
        .unwrap();
    assert_eq!(&first, b"HTTP/1.1 413", "a declared 20 MiB body");
    // Streamed (chunked, no length): refused once limits.max_body_bytes (4 MiB) have arrived.
    let s = TcpStream::connect(gw.addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        wr.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..20 {
            wr.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            wr.write_all(&chunk).await?;
            wr.write_all(b"\r\n").await?;
        }
        wr.write_all(b"0\r\n\r\n").await
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(
            deadline.saturating_duration_since(Instant::now()),
            rd.read(&mut buf),
        )
        .await
        {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            other => panic!(
                "no answer to a streamed 20 MiB body ({other:?}); got {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    assert!(
        got.starts_with(b"HTTP/1.1 413"),
        "a streamed 20 MiB body: {:?}",
        String::from_utf8_lossy(&got)
    );
    let _ = writer.await;
    normal.served(3).await;
    gw.stop().await;
}

#[tokio::test]
async fn a_flood_past_max_in_flight_gets_503_with_retry_after() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    // The four slow calls hold their slots until the flood has been answered.
    let (open, gate) = tokio::sync::watch::channel(false);
    let up = alpha_gated(gate).await;
    let gw = gateway(&up.url(), &[("max_in_flight", 4)], &[]).await;
    let (url, h) = (gw.url(), http());
    let slow = (0..4).map(|i| {
        let (h, url) = (h.clone(), url.clone());
        tokio::spawn(async move {
            call(
                &h,
                &url,
                &body(
                    i,
                    "tools/call",
                    json!({"name": "slow", "arguments": {}}),
                    json!({}),
                ),
                None,
            )
            .await
            .status
        })
    });
    let slow: Vec<_> = slow.collect();
    // All four reached the upstream (held at its gate): they hold their slots in Sluice.
    up.until("the four slow calls did not all start", |m| {
        m.calls("slow") == 4
    })
    .await;
    let started = Instant::now();
    let flood = (0..40).map(|i| {
        let (h, url) = (h.clone(), url.clone());
        async move { send(request(&h, &url, &echo(100 + i), None, &[])).await }
    });
    let answers = futures_util::future::join_all(flood).await;
    for a in &answers {
        assert_eq!(a.status, 503, "a request past max_in_flight: {}", a.text);
        assert_eq!(
            a.headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1"),
            "Retry-After on a 503"
        );
        assert_eq!(
            a.refused(503, -31020, "a request past max_in_flight")["limit"],
            "limits.max_in_flight",
            "{}",
            a.text
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "shedding took {:?}: it must not wait for a slot",
        started.elapsed()
    );
    // Health is not load-shed; the slow calls finish once their upstream answers.
    assert_eq!(
        h.get(format!("http://{}/healthz", gw.addr))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    open.send(true).unwrap();
    for s in slow {
        assert_eq!(
            s.await.unwrap(),
            200,
            "a call admitted before the flood completes"
        );
    }
    // Once the flood is over, a normal client is served again.
    assert_eq!(call(&h, &url, &echo(1000), None).await.status, 200);
    gw.stop().await;
}

#[tokio::test]
async fn a_request_head_over_max_header_bytes_gets_431() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    let gw = gateway(&up.url(), &[("max_header_bytes", 8192)], &[]).await;
    let normal = Normal::start(gw.url());
    let h = http();
    let big = "v".repeat(16 << 10);
    let a = send(request(
        &h,
        &gw.url(),
        &echo(1),
        None,
        &[("x-padding", &big)],
    ))
    .await;
    assert_eq!(
        a.status, 431,
        "a 16 KiB header over an 8 KiB bound: {}",
        a.text
    );
    let many: Vec<(String, String)> = (0..200)
        .map(|i| (format!("x-h{i}"), "w".repeat(60)))
        .collect();
    let mut r = request(&h, &gw.url(), &echo(2), None, &[]);
    for (k, v) in &many {
        r = r.header(k.as_str(), v.as_str());
    }
    assert_eq!(
        send(r).await.status,
        431,
        "many headers adding up past the bound"
    );
    let ok = send(request(
        &h,
        &gw.url(),
        &echo(3),
        None,
        &[("x-padding", &"v".repeat(4 << 10))],
    ))
    .await;
    assert_eq!(
        ok.status, 200,
        "a head under the bound is served: {}",
        ok.text
    );
    normal.served(1).await;
    gw.stop().await;
}

/// The soft RLIMIT_NOFILE of this process.
fn nofile() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or("");
    let n: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (
        n.first().copied().unwrap_or(1024),
        n.get(1).copied().unwrap_or(1024),
    )
}

/// Raises this process's soft RLIMIT_NOFILE to `want` (as far as the hard limit allows, with
/// `prlimit`, since tests forbid unsafe code); fails the test, saying so, when it cannot.
fn ensure_nofile(want: u64) {
    let (soft, hard) = nofile();
    if soft >= want {
        return;
    }
    let to = want.min(hard);
    let _ = Command::new("prlimit")
        .args([
            "--pid",
            &std::process::id().to_string(),
            &format!("--nofile={to}:{hard}"),
        ])
        .status();
    let (soft, hard) = nofile();
    assert!(soft >= want, "this test needs RLIMIT_NOFILE >= {want} for the Sluice it runs; the soft limit is {soft} (hard {hard}) and could not be raised far enough: raise `ulimit -n`");
}

fn field(lines: &[String], prefix: &str, key: &str) -> usize {
    let line = lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} line in {lines:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == key)
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    words[at + 1].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_leave_a_normal_client_served() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    const IDLE: usize = 3000;
    const LIMIT: usize = IDLE + 50;
    let started = Instant::now();
    // Sluice runs in this process and holds one descriptor per connection.
    ensure_nofile(LIMIT as u64 + 1000);
    let up = alpha().await;
    let gw = gateway(
        &up.url(),
        &[("max_connections", LIMIT as i64)],
        &[("header_read_ms", 25_000)],
    )
    .await;
    let h = http();
    // The normal client's keep-alive connection exists before the flood.
    assert_eq!(call(&h, &gw.url(), &echo(1), None).await.status, 200);
    let addr = gw.addr;
    let (mut first, lines) = tokio::task::spawn_blocking(move || hold_connections(addr, IDLE))
        .await
        .unwrap();
    assert!(
        !lines.iter().any(|l| l.starts_with("NOFILE-SHORT")),
        "the helper could not raise RLIMIT_NOFILE far enough: {lines:?}"
    );
    assert_eq!(field(&lines, "OPENED", "OPENED"), IDLE, "{lines:?}");
    assert_eq!(
        field(&lines, "HELD", "HELD"),
        IDLE,
        "every idle connection under the limit is held: {lines:?}"
    );
    // Under the limit: the pooled connection and a fresh one are both served.
    assert_eq!(
        call(&h, &gw.url(), &echo(2), None).await.status,
        200,
        "the pooled connection"
    );
    assert_eq!(
        call(&http(), &gw.url(), &echo(3), None).await.status,
        200,
        "a fresh connection"
    );
    // Past the limit: new connections are closed at once; the held ones keep working.
    let (mut second, lines) = tokio::task::spawn_blocking(move || hold_connections(addr, 200))
        .await
        .unwrap();
    let closed = field(&lines, "HELD", "CLOSED");
    assert!(
        closed >= 140,
        "connections past max_connections are closed at once: {lines:?}"
    );
    assert_eq!(
        call(&h, &gw.url(), &echo(4), None).await.status,
        200,
        "the pooled connection past the limit"
    );
    for c in [&mut first, &mut second] {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    // Once they are gone, fresh connections are accepted again.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let r = request(&http(), &gw.url(), &echo(5), None, &[])
            .send()
            .await;
        if r.map(|r| r.status().as_u16() == 200).unwrap_or(false) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fresh connections are served again after the idle ones closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn sigterm_mid_stream_lets_the_in_flight_response_finish() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    // The binary, on 127.0.0.1:0, ready once /readyz answers.
    let cfg = config(&up.url(), &[], &[])
        .set("audit", "enabled", true)
        .text();
    let mut sluice = Sluice::start_env(&cfg, &Env::new().set("RUST_LOG", "sluice=info")).await;
    let (addr, url) = (sluice.addr.clone(), sluice.url());
    let h = http();
    let mut b = body(
        1,
        "tools/call",
        json!({"name": "stream", "arguments": {}}),
        json!({}),
    );
    b["params"]["_meta"]["progressToken"] = json!("p1");
    let mut resp = request(&h, &url, &b, None, &[])
        .send()
        .await
        .expect("the streaming call");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let first = resp.chunk().await.unwrap().expect("a first event");
    assert!(
        String::from_utf8_lossy(&first).contains("notifications/progress"),
        "{first:?}"
    );
    // Mid-stream: SIGTERM.
    sluice.signal("TERM").await;
    let mut rest = Vec::new();
    while let Some(c) = tokio::time::timeout(Duration::from_secs(2), resp.chunk())
        .await
        .expect("the stream goes on")
        .expect("a chunk")
    {
        rest.extend_from_slice(&c);
    }
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        rest.contains("stream done") && rest.contains("\"resultType\":\"complete\""),
        "the in-flight response completed: {rest}"
    );
    let (status, err) = sluice
        .exit_within(Duration::from_secs(5))
        .await
        .expect("sluice exits after the stream");
    assert!(status.success(), "sluice exit status {status}");
    assert!(err.contains("shutdown signal received"), "{err}");
    // The audit log writes the record of the response the drain let finish (it ended after the
    // shutdown began), before the process exits.
    let record = err
        .lines()
        .find(|l| l.starts_with('{') && l.contains("\"name\":\"stream\""))
        .unwrap_or_else(|| panic!("no audit record of the drained call:\n{err}"));
    assert!(record.contains("\"status\":200"), "{record}");
    assert!(
        TcpStream::connect(&addr).await.is_err(),
        "the listener is closed after shutdown"
    );
}

#[tokio::test]
async fn an_oversized_upstream_answer_is_a_502_naming_the_upstream() {
    // Heavy (connections, bodies, floods): not next to the tests that measure Sluice.
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    let gw = gateway(
        &up.url(),
        &[
            ("max_response_bytes", 65536),
            ("max_sse_event_bytes", 65536),
        ],
        &[],
    )
    .await;
    let normal = Normal::start(gw.url());
    let h = http();
    for tool in ["huge", "huge_event"] {
        let a = call(
            &h,
            &gw.url(),
            &body(
                1,
                "tools/call",
                json!({"name": tool, "arguments": {}}),
                json!({}),
            ),
            None,
        )
        .await;
        assert_eq!(a.status, 502, "{tool}: {}", a.text);
        let msg = a.msg["error"]["message"].as_str().unwrap_or("");
        assert!(
            msg.contains("upstream 'alpha'") && msg.contains("65536"),
            "{tool}: the error names the upstream and the bound: {}",
            a.text
        );
        assert!(
            !a.text.contains("yyyy") && !a.text.contains("xxxx"),
            "{tool}: none of the answer is relayed"
        );
    }
    normal.served(1).await;
    gw.stop().await;
}
