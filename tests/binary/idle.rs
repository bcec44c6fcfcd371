//! Idle client connections (issue 28, class 3: idle connections hold the connection pool),
//! over raw sockets and real HTTP/2 clients against Sluice in-process:
//!
//! - a connection with no request in progress is closed once idle for
//!   `timeouts.idle_connection_ms` since its last request ended, HTTP/1.1 keep-alive and HTTP/2
//!   alike (the HTTP/2 one with a GOAWAY, though its client answers every PING);
//! - idle HTTP/2 connections from four sources (tests/peers/hold_h2.py: the preface, no request,
//!   PINGs answered) hold only their default share (8 of 40 each), an authenticated client is
//!   served meanwhile, and each is closed with a GOAWAY once idle for `timeouts.header_read_ms`
//!   (before a first request);
//! - when such connections take every place, an authenticated client takes the place of the
//!   oldest idle one (closed outright), and a connection that served an authenticated request
//!   is never taken.
//!
//! Waits on events (answers, a connection's end), never on the clock; the 30 s guard only fails
//! a test that would otherwise hang.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::shares::{alpha, config, echo, response, GUARD};
use crate::support::gateway::{ALICE_KEY, BOB_KEY};
use crate::support::holders::H2Holders;
use crate::support::rpc::call;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_since_its_last_request_is_closed_after_idle_connection_ms_over_http1_and_http2(
) {
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    // A head may take a minute (hyper's own HTTP/1.1 deadline between requests, past the
    // guard): only idle_connection_ms can close these within it.
    let gw = config(
        &up.url(),
        &[],
        &[("header_read_ms", 60_000), ("idle_connection_ms", 1500)],
    )
    .start()
    .await;
    // HTTP/1.1 keep-alive: a call answered, then nothing; Sluice closes it (end of file).
    let mut h1 = TcpStream::connect(gw.addr).await.expect("connect");
    assert_eq!(echo_on(&mut h1, BOB_KEY, 1).await, 200);
    let mut b = [0u8; 1];
    let end = tokio::time::timeout(GUARD, h1.read(&mut b))
        .await
        .expect("HTTP/1.1: closed once idle (on main: held past the guard)");
    assert!(
        matches!(end, Ok(0) | Err(_)),
        "end of file, not bytes: {end:?}"
    );
    // HTTP/2 (prior knowledge): a request answered, then only what the client's connection task
    // does on its own (answering PINGs, SETTINGS); the connection ends once Sluice closes it.
    let stream = TcpStream::connect(gw.addr).await.expect("connect");
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an h2c handshake");
    let conn = tokio::spawn(conn);
    let req = http::Request::get(format!("http://{}/healthz", gw.addr))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.expect("/healthz over HTTP/2");
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.expect("its body");
    let ended = tokio::time::timeout(GUARD, conn)
        .await
        .expect("HTTP/2: closed once idle (on main: held while PINGs are answered)");
    let ended = ended.expect("the connection task");
    assert!(
        ended.is_ok(),
        "closed gracefully (a GOAWAY), not reset: {ended:?}"
    );
    assert!(send.ready().await.is_err(), "no further request on it");
    gw.stop().await;
}

/// A whole echo call on a raw keep-alive HTTP/1.1 connection with `key`: its status.
async fn echo_on(s: &mut TcpStream, key: &str, id: u64) -> u16 {
    let text = echo(id).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    );
    s.write_all(head.as_bytes()).await.expect("send the call");
    response(s).await.0
}

/// Source addresses of this host (Linux routes all of 127/8 to lo); on a listener that is not
/// loopback each is a source with its own share.
const SOURCES: [&str; 5] = [
    "127.0.0.2",
    "127.0.0.3",
    "127.0.0.4",
    "127.0.0.5",
    "127.0.0.6",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_are_closed_with_a_goaway_and_an_authenticated_client_is_served_while_four_sources_hold_their_share(
) {
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    // 40 connections; by default a source holds 8 of them (a quarter, 10, let four fill it).
    let g = config(
        &up.url(),
        &[("max_connections", 40)],
        &[("header_read_ms", 5000)],
    )
    .top("listen", "0.0.0.0:0");
    let gw = g.start().await;
    let mut holders = H2Holders::start(gw.addr.port(), 10, &SOURCES[..4]);
    let decided = holders.decided(4, GUARD).await;
    for (source, held, closed) in &decided {
        assert_eq!(
            (*held, *closed),
            (8, 2),
            "{source} holds its default share, 8: {decided:?}"
        );
    }
    // An authenticated client from another source is served on a fresh connection meanwhile.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(GUARD)
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", gw.addr.port());
    assert_eq!(
        call(&fresh, &url, &echo(1), Some(BOB_KEY)).await.status,
        200,
        "an authenticated client is served"
    );
    // No request on them: each is closed gracefully once idle for header_read_ms, though it
    // answers every PING (on main they stayed open as long as their peer answered).
    let all = holders.until("ALL-CLOSED", GUARD).await;
    assert_eq!(
        all, "ALL-CLOSED GOAWAY 32 EOF 0",
        "every idle connection got a GOAWAY: {:?}",
        holders.seen
    );
    holders.stop().await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_client_takes_the_place_of_an_idle_connection_without_a_credential_and_its_own_is_never_taken(
) {
    let _measured = crate::support::process::measured().await;
    let up = alpha().await;
    // Long enough that nothing here goes idle for it.
    let g = config(
        &up.url(),
        &[("max_connections", 40)],
        &[("header_read_ms", 60_000)],
    )
    .top("listen", "0.0.0.0:0");
    let gw = g.start().await;
    let mut holders = H2Holders::start(gw.addr.port(), 8, &SOURCES);
    let decided = holders.decided(5, GUARD).await;
    assert!(
        decided
            .iter()
            .all(|(_, held, closed)| (*held, *closed) == (8, 0)),
        "five sources hold every place: {decided:?}"
    );
    // Every place is taken: bob's connection takes an idle one's (on main: closed at once).
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], gw.addr.port()));
    let mut bob = TcpStream::connect(to).await.expect("connect");
    assert_eq!(
        echo_on(&mut bob, BOB_KEY, 1).await,
        200,
        "an authenticated client is served while the pool is full"
    );
    let closed = holders.until("CLOSED ", GUARD).await;
    assert!(
        closed.ends_with(" EOF"),
        "the idle connection that made room was closed outright: {closed}"
    );
    // Alice's three connections each take another's place; bob's, authenticated, is never taken.
    let mut alice = Vec::new();
    for i in 0..3 {
        let mut s = TcpStream::connect(to).await.expect("connect");
        assert_eq!(echo_on(&mut s, ALICE_KEY, 10 + i).await, 200);
        alice.push(s);
        holders.until("CLOSED ", GUARD).await;
    }
    assert_eq!(
        echo_on(&mut bob, BOB_KEY, 2).await,
        200,
        "bob's connection still serves"
    );
    for s in &mut alice {
        assert_eq!(echo_on(s, ALICE_KEY, 20).await, 200, "and alice's");
    }
    let evicted = holders
        .seen
        .iter()
        .filter(|l| l.starts_with("CLOSED "))
        .count();
    assert_eq!(
        evicted, 4,
        "one idle connection per newcomer: {:?}",
        holders.seen
    );
    holders.stop().await;
    gw.stop().await;
}
