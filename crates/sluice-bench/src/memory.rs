//! Memory: parking many bridge-A exchanges in Sluice, and the connections-only baseline.
//!
//! A parked exchange holds, in Sluice, its own state (the parked entry, the live exchange, its
//! legacy session, their tasks and channels) and two upstream connections (the session's GET
//! stream and the call's POST stream, each with a hyper connection task and buffers). `hold`
//! opens exactly those connections with the same client Sluice uses and keeps them, nothing
//! else: its RSS growth per exchange is the connections' share, and the rest of Sluice's growth
//! is Sluice's own state. Kernel socket buffers are not in either RSS.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Uri};
use sluice::upstream::client::{Answer, HttpClient};

/// Opens one exchange's connections: a session, its GET stream, and a call stream past its ask.
async fn hold_one(c: &HttpClient, url: &Uri, id: u64) -> Result<Vec<Answer>, String> {
    let s = crate::bridge::open(c, url).await?;
    let mut h = HeaderMap::new();
    h.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2025-11-25"),
    );
    if let Some(sid) = &s.sid {
        h.insert("mcp-session-id", sid.clone());
    }
    let (_, get) = c
        .send(Method::GET, "legacy", url, h, Bytes::new(), None)
        .await
        .map_err(|e| e.to_string())?;
    let (call, _) = crate::bridge::call_until_ask(c, url, &s, id).await?;
    Ok(vec![get, Answer::Sse(call)])
}

/// The `hold` subcommand: prints `HOLD <rss_kib_before> <rss_kib_after> <n>`, then holds until killed.
pub(crate) async fn hold(url: &str, n: usize, http2: bool) -> Result<(), String> {
    let url: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let c = crate::procs::client();
    if http2 {
        c.add_http2(url.authority().cloned());
    }
    let pid = std::process::id();
    // Warm the runtime, the pool and the allocator with one exchange first.
    let mut held = hold_one(&c, &url, 0).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = crate::procs::rss_kib(pid).unwrap_or(0);
    let results: Vec<Result<Vec<Answer>, String>> = futures_util::stream::iter(0..n)
        .map(|i| hold_one(&c, &url, 1 + i as u64))
        .buffer_unordered(64)
        .collect()
        .await;
    let mut ok = 0;
    for r in results {
        held.extend(r?);
        ok += 1;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = crate::procs::rss_kib(pid).unwrap_or(0);
    println!("HOLD {before} {after} {ok}");
    std::future::pending::<()>().await;
    drop(held);
    Ok(())
}

/// Parks `n` exchanges in Sluice (each call answered `input_required`, never retried); gives how many parked.
pub(crate) async fn park(
    c: &HttpClient,
    url: &Uri,
    n: usize,
    first_id: u64,
) -> Result<usize, String> {
    let results: Vec<Result<(String, String), String>> = futures_util::stream::iter(0..n)
        .map(|i| crate::bridge::start_round(c, url, first_id + i as u64))
        .buffer_unordered(64)
        .collect()
        .await;
    let mut ok = 0;
    for r in results {
        r?;
        ok += 1;
    }
    Ok(ok)
}
