//! `sluice demo`: Sluice on loopback in front of four built-in demo upstreams: two modern
//! (2026-07-28) ones, `alpha` and `beta`, a handshake-era (2025-11-25) one, `repo`, whose tools
//! ask the client's model mid-call (bridge A turns each ask into an `input_required` round), and
//! `notes`, a 2025-11-25 stdio server Sluice starts as a child process (this binary's hidden
//! `demo-stdio-server`), whose one tool asks the model too.
//! The demo's Sluice is governed: at most [`MAX_ROUNDS`] rounds per request (so `loop_forever`, a
//! loop bomb, is cut), and the policy [`POLICY`] (written to a file in the temporary directory
//! for the run) asks the user's approval before a destructive tool (`delete_branch`) runs.
//!
//! Takes an optional listen address; gives a running gateway and prints how to reach it, or
//! with `--walkthrough` runs a scripted client that prints and checks each step and returns
//! success only when every step held.

pub mod walkthrough;

pub use sluice_testkit::demo::{legacy, stdio, upstream};

use std::net::SocketAddr;

use sluice::config::{Config, Overrides};

/// The demo's round cap (`[budget] max_rounds`).
pub const MAX_ROUNDS: u32 = 3;

/// The demo's policy file.
pub const POLICY: &str = r#"# The demo's policy: a destructive tool runs only once the user approved it.
[[rule]]
name = "approve-destructive-tools"
match = { method = ["tools/call"], destructive = true }
effect = "approve"
"#;

/// The demo's config: its round cap and its policy file at `policy`.
pub fn config_text(policy: &str) -> String {
    format!(
        "policies = [{}]\n\n[budget]\nmax_rounds = {MAX_ROUNDS}\n",
        toml::Value::String(policy.to_owned())
    )
}

/// The policy file written for one run, removed when dropped.
struct PolicyFile(std::path::PathBuf);

impl PolicyFile {
    fn write() -> Result<PolicyFile, String> {
        let path =
            std::env::temp_dir().join(format!("sluice-demo-policy-{}.toml", std::process::id()));
        std::fs::write(&path, POLICY).map_err(|e| {
            format!(
                "{}: cannot write the demo's policy file: {e}",
                path.display()
            )
        })?;
        Ok(PolicyFile(path))
    }
}

impl Drop for PolicyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs the demo; the exit code is the walkthrough's verdict (or success after Ctrl-C).
pub async fn run(
    walkthrough: bool,
    listen: Option<String>,
) -> Result<std::process::ExitCode, String> {
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let alpha = upstream::start("alpha", any)
        .await
        .map_err(|e| e.to_string())?;
    let beta = upstream::start("beta", any)
        .await
        .map_err(|e| e.to_string())?;
    let repo = legacy::start(any).await.map_err(|e| e.to_string())?;
    let policy = PolicyFile::write()?;
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to run the demo's stdio upstream: {e}"))?;
    let notes = format!(
        "notes=stdio:{} demo-stdio-server",
        shlex::try_quote(&exe.to_string_lossy()).map_err(|e| e.to_string())?
    );
    let over = Overrides {
        listen: Some(listen.unwrap_or_else(|| "127.0.0.1:0".into())),
        upstreams: vec![
            format!("alpha={}", alpha.url()),
            format!("beta={}", beta.url()),
            format!("repo={}", repo.url()),
            notes,
        ],
        no_prefix: false,
        policies: Vec::new(),
        env: Vec::new(),
    };
    let cfg = Config::from_toml(
        &config_text(&policy.0.display().to_string()),
        "<demo>",
        &over,
    )
    .map_err(|e| e.0)?;
    let running = sluice::start(cfg).await?;
    running.ready().await;
    println!(
        "Sluice is listening on {} in front of four demo upstreams:",
        running.url()
    );
    println!(
        "  alpha  {}  (2026-07-28, delete_branch is destructive)\n  beta   {}  (2026-07-28)",
        alpha.url(),
        beta.url()
    );
    println!(
        "  repo   {}  (2025-11-25, summarize_repo asks your model twice, loop_forever never stops)",
        repo.url()
    );
    println!("  notes  stdio: {} demo-stdio-server  (2025-11-25 child process, suggest_title asks your model)", exe.display());
    println!(
        "Governed by [budget] max_rounds = {MAX_ROUNDS} and the policy {}:",
        policy.0.display()
    );
    for line in POLICY.lines() {
        println!("  {line}");
    }
    if walkthrough {
        let ok = walkthrough::run(&running.url(), &repo.seen, &alpha.seen).await;
        running.stop().await;
        return Ok(if ok {
            std::process::ExitCode::SUCCESS
        } else {
            std::process::ExitCode::FAILURE
        });
    }
    println!("\nTry it:\n  curl -s {} \\\n    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \\\n    -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}'", running.url());
    println!("\nPress Ctrl-C to stop.");
    sluice::shutdown::signal().await;
    running.stop().await;
    Ok(std::process::ExitCode::SUCCESS)
}
