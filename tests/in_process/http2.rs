//! Bridge A over HTTP/2 (`http2 = true`, issue 14): twelve exchanges parked at once on a
//! 2025-11-25 upstream that speaks HTTP/2 only hold twelve sessions, each with its GET stream and
//! its call's stream, and all of them are streams of one TCP connection (over HTTP/1.1 they are
//! 24 connections); each retry then gets its own call's answer on it. The upstream is the Rust
//! mock (crates/sluice-testkit/src/legacy.rs) served HTTP/2-only: the official SDKs' 2025-11-25 servers
//! here run on HTTP/1.1-only servers (uvicorn), and the modern SDK server over HTTP/2 is in
//! `with_peers/interop/http2.rs`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::support::call::{http, retry, sample, Call};
use crate::support::gateway::{keys, Gateway, Upstream};
use crate::support::legacy::{self, Step};
use crate::support::modern::{result_text, tool_args};

/// The legacy mock's `ask` tool: one sampling ask (id `"ask-<q>"`), then `done <q>`.
fn asker(s: &crate::support::modern::Seen) -> Vec<Step> {
    let q = s.params["arguments"]["q"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ask = format!("\"ask-{q}\"");
    vec![
        Step::Send(format!(
            r#"{{"jsonrpc":"2.0","id":{ask},"method":"sampling/createMessage","params":{{"messages":[{{"role":"user","content":{{"type":"text","text":"question {q}"}}}}],"maxTokens":10}}}}"#
        )),
        Step::Await(vec![ask]),
        Step::Send(result_text(
            "{id}",
            &format!(r#"{{"content":[{{"type":"text","text":"done {q}"}}]}}"#),
        )),
    ]
}

fn h2(name: &str, up: &legacy::Legacy) -> Upstream {
    Upstream::new(name, &up.url())
        .key("era", "2025-11-25")
        .key("http2", true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_removes_an_http2_upstream_lets_its_parked_exchange_finish_over_http2() {
    let (old, other) = (
        legacy::start_h2_only(json!([tool_args("ask", &["q"])]), asker).await,
        legacy::start(json!([]), |_| vec![]).await,
    );
    let cfg = |with_old: bool| {
        let g = Gateway::bridge(keys::BRIDGE_A)
            .upstream_spec(Upstream::new("other", &other.url()).key("era", "2025-11-25"));
        if with_old {
            g.upstream_spec(h2("old", &old))
        } else {
            g
        }
    };
    let gw = cfg(true).start().await;
    let (url, h) = (gw.url(), http());
    let call = Call::new("old__ask", json!({"q": "c0"}));
    let round = call.send(&h, &url, json!({})).await;
    let key = round
        .input_requests()
        .keys()
        .next()
        .cloned()
        .expect("one ask");
    gw.reload(cfg(false).config())
        .await
        .expect("the reload applies");
    // The old generation's exchange still speaks HTTP/2 to its upstream: its answer goes up and
    // its result comes back (a client switched to HTTP/1.1 here fails: "invalid HTTP version").
    let done = call
        .send(
            &h,
            &url,
            retry(json!({ key: sample("answer", "m") }), &round.state()),
        )
        .await;
    assert_eq!(done.text(), "done c0", "{}", done.msg);
    assert_eq!(old.replies().len(), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_would_switch_a_hosts_http_version_is_refused_and_changes_nothing() {
    let (a, b) = (
        legacy::start_h2_only(json!([tool_args("ask", &["q"])]), asker).await,
        legacy::start(json!([]), |_| vec![]).await,
    );
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .upstream_spec(h2("a", &a))
        .upstream_spec(Upstream::new("b", &b.url()).key("era", "2025-11-25"))
        .start()
        .await;
    let a_off = Upstream::new("a", &a.url()).key("era", "2025-11-25");
    let why = gw
        .reload(
            Gateway::bridge(keys::BRIDGE_A)
                .upstream_spec(a_off)
                .config(),
        )
        .await
        .expect_err("refused");
    assert!(
        why.contains(&format!("http2 changed for {}", a.addr)),
        "{why}"
    );
    let b_on = Upstream::new("b", &b.url())
        .key("era", "2025-11-25")
        .key("http2", true);
    let why = gw
        .reload(
            Gateway::bridge(keys::BRIDGE_A)
                .upstream_spec(h2("a", &a))
                .upstream_spec(b_on)
                .config(),
        )
        .await
        .expect_err("refused");
    assert!(
        why.contains(&format!("http2 changed for {}", b.addr)),
        "{why}"
    );
    // Still served as before, over HTTP/2.
    let round = Call::new("a__ask", json!({"q": "k"}))
        .send(&http(), &gw.url(), json!({}))
        .await;
    assert_eq!(round.input_requests().len(), 1, "{}", round.msg);
    assert_eq!(a.accepted.load(Ordering::SeqCst), 1);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_http1_upstreams_host_cannot_be_switched_to_http2_while_its_exchange_drains() {
    let (old, other) = (
        legacy::start(json!([tool_args("ask", &["q"])]), asker).await,
        legacy::start(json!([]), |_| vec![]).await,
    );
    let base = || {
        Gateway::bridge(keys::BRIDGE_A)
            .upstream_spec(Upstream::new("other", &other.url()).key("era", "2025-11-25"))
    };
    let gw = base()
        .upstream_spec(Upstream::new("old", &old.url()).key("era", "2025-11-25"))
        .start()
        .await;
    let (url, h) = (gw.url(), http());
    let call = Call::new("old__ask", json!({"q": "c0"}));
    let round = call.send(&h, &url, json!({})).await;
    let key = round
        .input_requests()
        .keys()
        .next()
        .cloned()
        .expect("one ask");
    gw.reload(base().config())
        .await
        .expect("removing it applies");
    // The host is recorded as HTTP/1.1 for the process's life, removed upstream or not.
    let why = gw
        .reload(base().upstream_spec(h2("old", &old)).config())
        .await
        .expect_err("switching its host is refused");
    assert!(
        why.contains(&format!("http2 changed for {}", old.addr)),
        "{why}"
    );
    let done = call
        .send(
            &h,
            &url,
            retry(json!({ key: sample("answer", "m") }), &round.state()),
        )
        .await;
    assert_eq!(done.text(), "done c0", "{}", done.msg);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_parked_exchanges_share_one_http2_connection_and_each_retry_gets_its_own_answer() {
    let up = legacy::start_h2_only(json!([tool_args("ask", &["q"])]), asker).await;
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .upstream_spec(h2("old", &up))
        .start()
        .await;
    let (url, h) = (gw.url(), http());
    let calls: Vec<Call> = (0..12)
        .map(|i| Call::new("ask", json!({"q": format!("c{i}")})).id(json!(i)))
        .collect();
    let rounds =
        futures_util::future::join_all(calls.iter().map(|c| c.send(&h, &url, json!({})))).await;
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        12,
        "all twelve are parked at once"
    );
    assert!(
        gw.gateway.bridge.pool.open_sessions() >= 12,
        "each on a session of its own"
    );
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "the probe, 12 sessions, their GET streams and calls: one connection"
    );
    for (i, round) in rounds.iter().enumerate().rev() {
        let (key, ask) = round
            .input_requests()
            .iter()
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
            .expect("one ask");
        assert_eq!(
            ask["params"]["messages"][0]["content"]["text"],
            format!("question c{i}"),
            "{}",
            round.msg
        );
        let done = calls[i]
            .send(
                &h,
                &url,
                retry(
                    json!({ key: sample(&format!("answer {i}"), "m") }),
                    &round.state(),
                ),
            )
            .await;
        assert_eq!(done.text(), format!("done c{i}"), "{}", done.msg);
    }
    let replies = up.replies();
    assert_eq!(replies.len(), 12, "each ask answered once: {replies:?}");
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "still the one connection"
    );
    assert_eq!(gw.gateway.bridge.parked.len(), 0);
    gw.stop().await;
}

/// A hostile HTTP/2 server: `/flood` streams 4 MiB of SSE events nobody reads; anything else
/// gets a small JSON answer.
async fn flooding_server() -> std::net::SocketAddr {
    use http_body_util::BodyExt;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |req: http::Request<hyper::body::Incoming>| async move {
                        type B = http_body_util::combinators::BoxBody<
                            bytes::Bytes,
                            std::convert::Infallible,
                        >;
                        let r: http::Response<B> = if req.uri().path() == "/flood" {
                            let ev =
                                bytes::Bytes::from(format!("data: {}\n\n", "x".repeat(65_528)));
                            let frames = futures_util::stream::iter(
                                (0..64).map(move |_| Ok(hyper::body::Frame::data(ev.clone()))),
                            );
                            let body = http_body_util::StreamBody::new(frames).boxed();
                            http::Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(body)
                                .unwrap()
                        } else {
                            let body = http_body_util::Full::new(bytes::Bytes::from_static(
                                b"{\"ok\":true}",
                            ))
                            .boxed();
                            http::Response::builder()
                                .header("content-type", "application/json")
                                .body(body)
                                .unwrap()
                        };
                        Ok::<_, std::convert::Infallible>(r)
                    },
                );
                let b =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
                let _ = b
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_left_unread_over_http2_do_not_stall_the_next_request_on_the_connection() {
    use sluice::upstream::client::{Answer, HttpClient};
    let addr = flooding_server().await;
    let c = HttpClient::new(
        Duration::from_secs(2),
        Duration::from_millis(1500),
        1 << 20,
        1 << 20,
        Duration::from_secs(300),
    );
    c.add_http2([addr.to_string().parse().unwrap()]);
    let post = |path: &'static str| {
        let (c, url) = (
            c.clone(),
            format!("http://{addr}{path}").parse::<http::Uri>().unwrap(),
        );
        async move {
            c.post(
                "up",
                &url,
                http::HeaderMap::new(),
                bytes::Bytes::from_static(b"{}"),
                None,
            )
            .await
        }
    };
    // Three streams each offered 4 MiB, none read (as parked exchanges read nothing): with
    // hyper's default windows (2 MiB a stream, 5 MiB the connection) they fill the connection
    // and the next request times out; Sluice's (64 KiB a stream) leave room for it.
    let mut unread = Vec::new();
    for _ in 0..3 {
        match post("/flood").await {
            Ok(Answer::Sse(s)) => unread.push(s),
            _ => panic!("the flood is an SSE answer"),
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    match post("/ok").await {
        Ok(Answer::Json(s, b)) => assert_eq!((s.as_u16(), &b[..]), (200, &b"{\"ok\":true}"[..])),
        Ok(_) => panic!("a JSON answer"),
        Err(e) => panic!("the request behind three unread streams failed: {e}"),
    }
    drop(unread);
}
