//! Scale figure of `run` for a 2025-11-25 stdio server (issue 29, point 4): one principal's
//! client sessions through Sluice, one after another, each `initialize`, one `tools/call` and
//! `DELETE` (as `langchain-mcp-adapters` opens a session per call), with the upstream's default
//! `max_processes`, `spare_processes` and `idle_ms`. Takes the run's [`Bench`]; gives how many
//! processes run under Sluice afterwards and the RSS of Sluice and of them.

use std::time::Instant;

use bytes::Bytes;
use http::{Method, Uri};
use serde_json::{json, Value};
use sluice::upstream::client::final_message;

use super::http::start_sluice;
use super::Bench;
use crate::procs::{descendants, rss_kib};

/// One size: `n` client sessions of one principal.
pub(crate) struct StdioSessions {
    pub(crate) n: usize,
    /// Processes under Sluice afterwards (its stdio servers and what they started).
    pub(crate) processes: usize,
    pub(crate) sluice_kib: u64,
    pub(crate) children_kib: u64,
    /// Wall time per client session (initialize, call, DELETE).
    pub(crate) per_session_ms: f64,
}

/// Opens `n` client sessions one after another on Sluice in front of `sluice-bench
/// stdio-upstream`, a call on each; counts and measures Sluice's process tree.
pub(crate) async fn stdio_sessions(b: &Bench<'_>, n: usize) -> Result<StdioSessions, String> {
    let c = &b.c;
    let cfg = format!(
        "\n[audit]\nenabled = false\n\n[[upstream]]\nname = \"notes\"\ncommand = [{:?}, \"stdio-upstream\"]\nera = \"2025-11-25\"\n",
        b.me.display().to_string()
    );
    let (sluice, url) =
        start_sluice(&b.env, &b.o.sluice, &format!("sluice-stdio-{n}"), cfg, c).await?;
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let t0 = Instant::now();
    for i in 0..n {
        let s = crate::bridge::open(c, &uri).await?;
        let h = || crate::bridge::legacy_headers(s.sid.as_ref());
        let body = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}});
        let a = c
            .post("sluice", &uri, h(), Bytes::from(body.to_string()), None)
            .await
            .map_err(|e| e.to_string())?;
        let (_, msg) = final_message(a, "sluice")
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&msg).map_err(|e| e.to_string())?;
        if v["result"]["content"][0]["text"] != crate::wire::arg_text().as_str() {
            return Err(format!(
                "a call to the stdio server on client session {i} ended in {v}"
            ));
        }
        c.send(Method::DELETE, "sluice", &uri, h(), Bytes::new(), None)
            .await
            .map_err(|e| e.to_string())?;
    }
    let per_session_ms = t0.elapsed().as_secs_f64() * 1e3 / n.max(1) as f64;
    let tree = descendants(sluice.pid());
    let children_kib = tree.iter().filter_map(|p| rss_kib(*p)).sum();
    let sluice_kib = rss_kib(sluice.pid()).unwrap_or(0);
    drop(sluice);
    Ok(StdioSessions {
        n,
        processes: tree.len(),
        sluice_kib,
        children_kib,
        per_session_ms,
    })
}
