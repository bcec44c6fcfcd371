//! `sluice demo`: Sluice on loopback in front of three built-in demo upstreams: two modern
//! (2026-07-28) ones, `alpha` and `beta`, and a handshake-era (2025-11-25) one, `repo`, whose
//! tool asks the client's model mid-call (bridge A turns each ask into an `input_required` round).
//!
//! Takes an optional listen address; gives a running gateway and prints how to reach it, or
//! with `--walkthrough` runs a scripted client that prints and checks each step and returns
//! success only when every step held.

pub mod legacy;
pub mod upstream;
pub mod walkthrough;

use std::net::SocketAddr;

use crate::config::{Config, Overrides};

/// Runs the demo; the exit code is the walkthrough's verdict (or success after Ctrl-C).
pub async fn run(walkthrough: bool, listen: Option<String>) -> Result<std::process::ExitCode, String> {
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let alpha = upstream::start("alpha", any).await.map_err(|e| e.to_string())?;
    let beta = upstream::start("beta", any).await.map_err(|e| e.to_string())?;
    let repo = legacy::start(any).await.map_err(|e| e.to_string())?;
    let over = Overrides {
        listen: Some(listen.unwrap_or_else(|| "127.0.0.1:0".into())),
        upstreams: vec![format!("alpha={}", alpha.url()), format!("beta={}", beta.url()), format!("repo={}", repo.url())],
        no_prefix: false,
        policies: Vec::new(),
    };
    let cfg = Config::from_toml("", "<demo>", &over).map_err(|e| e.0)?;
    let running = crate::start(cfg).await?;
    running.ready().await;
    println!("Sluice is listening on {} in front of three demo upstreams:", running.url());
    println!("  alpha  {}  (2026-07-28)\n  beta   {}  (2026-07-28)", alpha.url(), beta.url());
    println!("  repo   {}  (2025-11-25, summarize_repo asks your model twice)", repo.url());
    if walkthrough {
        let ok = walkthrough::run(&running.url()).await;
        running.stop().await;
        return Ok(if ok { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE });
    }
    println!("\nTry it:\n  curl -s {} \\\n    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \\\n    -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}'", running.url());
    println!("\nPress Ctrl-C to stop.");
    crate::shutdown::signal().await;
    running.stop().await;
    Ok(std::process::ExitCode::SUCCESS)
}
