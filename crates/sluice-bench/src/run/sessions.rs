//! Scale figures of `run` for what clients hold open: 2025-11-25 client sessions (bridge B) and
//! idle client connections. Takes the run's [`Bench`]; gives RSS per session and per connection,
//! and a call's latency on a session with all the others open.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::Uri;
use serde_json::{json, Value};
use sluice::upstream::client::final_message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::start_sluice;
use super::Bench;
use crate::procs::{rss_kib, stats};

/// One client-session size.
pub(crate) struct Sessions {
    pub(crate) n: usize,
    pub(crate) before_kib: u64,
    pub(crate) after_kib: u64,
    pub(crate) open_s: f64,
    pub(crate) call_p50_us: f64,
}

/// One idle-connection size.
pub(crate) struct Conns {
    pub(crate) n: usize,
    pub(crate) before_kib: u64,
    pub(crate) after_kib: u64,
}

async fn start_mock(b: &Bench<'_>, tag: &str) -> Result<(crate::procs::Proc, String), String> {
    let mut mock = b.env.spawn(
        tag,
        &b.me,
        &["modern-upstream", "--name", "alpha", "--parent-stdin"].map(String::from),
        &[],
        true,
    )?;
    let url = format!(
        "http://127.0.0.1:{}/mcp",
        mock.line("LISTENING", Duration::from_secs(10))?
    );
    Ok((mock, url))
}

/// Opens `n` 2025-11-25 sessions on Sluice (initialize, initialized), then times `calls` calls
/// on one of them.
pub(crate) async fn sessions(b: &Bench<'_>, n: usize, calls: usize) -> Result<Sessions, String> {
    let c = &b.c;
    let (mock, alpha) = start_mock(b, &format!("sessions-mock-{n}")).await?;
    let cap = n + 64;
    let cfg = format!(
        "\n[audit]\nenabled = false\n\n[bridge]\nmax_client_sessions = {cap}\nmax_client_sessions_per_principal = {cap}\n\n[[upstream]]\nname = \"alpha\"\nurl = \"{alpha}\"\n"
    );
    let (sluice, url) =
        start_sluice(&b.env, &b.o.sluice, &format!("sluice-sessions-{n}"), cfg, c).await?;
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let first = crate::bridge::open(c, &uri).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_kib = rss_kib(sluice.pid()).unwrap_or(0);
    let t0 = Instant::now();
    let opened: Vec<Result<crate::bridge::LegacySession, String>> =
        futures_util::stream::iter(0..n)
            .map(|_| crate::bridge::open(c, &uri))
            .buffer_unordered(32)
            .collect()
            .await;
    let open_s = t0.elapsed().as_secs_f64();
    let mut held = Vec::with_capacity(n);
    for s in opened {
        let s = s?;
        if s.sid.is_none() {
            return Err("Sluice answered a 2025-11-25 initialize without a session id".into());
        }
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_kib = rss_kib(sluice.pid()).unwrap_or(0);
    let mut lat = Vec::with_capacity(calls);
    for i in 0..calls + 10 {
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": crate::wire::arg_text()}}});
        let t = Instant::now();
        let a = c
            .post(
                "sluice",
                &uri,
                crate::bridge::legacy_headers(first.sid.as_ref()),
                Bytes::from(body.to_string()),
                None,
            )
            .await
            .map_err(|e| e.to_string())?;
        let (_, msg) = final_message(a, "sluice")
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&msg).map_err(|e| e.to_string())?;
        if v["result"]["content"][0]["text"] != crate::wire::arg_text().as_str() {
            return Err(format!("a call on a 2025-11-25 session ended in {v}"));
        }
        if i >= 10 {
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    drop((sluice, mock, held));
    Ok(Sessions {
        n,
        before_kib,
        after_kib,
        open_s,
        call_p50_us: stats(&lat).0,
    })
}

/// One keep-alive connection that has made one request (`GET /healthz`) and stays open.
async fn idle_conn(addr: std::net::SocketAddr) -> Result<tokio::net::TcpStream, String> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let req = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let k = s.read(&mut buf).await.map_err(|e| e.to_string())?;
        if k == 0 {
            return Err("Sluice closed a fresh connection".into());
        }
        got.extend_from_slice(&buf[..k]);
    }
    if !got.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "GET /healthz answered {}",
            String::from_utf8_lossy(&got)
        ));
    }
    Ok(s)
}

/// Opens `n` client connections to Sluice, one request each, and holds them idle.
pub(crate) async fn conns(b: &Bench<'_>, n: usize) -> Result<Conns, String> {
    let (mock, alpha) = start_mock(b, &format!("conns-mock-{n}")).await?;
    let cfg = format!(
        "\n[audit]\nenabled = false\n\n[limits]\nmax_connections = {}\n\n[[upstream]]\nname = \"alpha\"\nurl = \"{alpha}\"\n",
        n + 64
    );
    let (sluice, url) =
        start_sluice(&b.env, &b.o.sluice, &format!("sluice-conns-{n}"), cfg, &b.c).await?;
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .map_err(|e| format!("{url}: {e}"))?;
    let warm = idle_conn(addr).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before_kib = rss_kib(sluice.pid()).unwrap_or(0);
    let opened: Vec<Result<tokio::net::TcpStream, String>> = futures_util::stream::iter(0..n)
        .map(|_| idle_conn(addr))
        .buffer_unordered(64)
        .collect()
        .await;
    let held = opened.into_iter().collect::<Result<Vec<_>, String>>()?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_kib = rss_kib(sluice.pid()).unwrap_or(0);
    drop((sluice, mock, held, warm));
    Ok(Conns {
        n,
        before_kib,
        after_kib,
    })
}
