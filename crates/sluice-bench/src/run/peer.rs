//! The comparison row: `mcp-proxy` (crates.io, tower-mcp based; built with its
//! `protocol-2026-07-28` feature) in front of the same modern mock, driven by the same wrk call
//! as Sluice. Takes the binary and the mock's URL; gives the running process and adds its path.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use serde_json::Value;
use sluice::upstream::client::{final_message, HttpClient};

use super::http::Path4;
use super::Bench;
use crate::procs::{self, Proc};
use crate::wire;

/// The tool as `mcp-proxy` publishes it: `<backend><separator><tool>`.
const NAME: &str = "alpha/echo";

/// The smallest config: one HTTP backend, nothing else on (no cache, metrics, auth or logging
/// of requests beyond its defaults).
fn config(port: u16, alpha: &str) -> String {
    format!(
        "[proxy]\nname = \"bench\"\nseparator = \"/\"\n\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n[[backends]]\nname = \"alpha\"\ntransport = \"http\"\nurl = \"{alpha}\"\n"
    )
}

/// One call through it, checked like Sluice's: the mock's full text back.
async fn call(c: &HttpClient, uri: &Uri) -> Result<(), String> {
    let body = Bytes::from(wire::tools_call(7, NAME));
    let a = c
        .post("mcp-proxy", uri, wire::modern_headers(NAME), body, None)
        .await
        .map_err(|e| e.to_string())?;
    let (status, msg) = final_message(a, "mcp-proxy")
        .await
        .map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_slice(&msg).map_err(|e| format!("HTTP {status}: {e}"))?;
    if v["result"]["content"][0]["text"] == wire::arg_text().as_str() {
        Ok(())
    } else {
        Err(format!("HTTP {status}: unexpected answer {v}"))
    }
}

/// Starts `mcp-proxy` in front of `alpha`, waits until a call goes through, adds its path.
pub(crate) async fn start(
    b: &Bench<'_>,
    bin: &Path,
    alpha: &str,
    paths: &mut Vec<Path4>,
) -> Result<Proc, String> {
    let port = procs::free_port()?;
    let cfg = b.o.dir.join("mcp-proxy.toml");
    std::fs::write(&cfg, config(port, alpha)).map_err(|e| e.to_string())?;
    let p = b.env.spawn(
        "mcp-proxy",
        bin,
        &["--config".into(), cfg.display().to_string()],
        &[("RUST_LOG", "warn")],
        false,
    )?;
    // It serves MCP at the root.
    let url = format!("http://127.0.0.1:{port}/");
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match call(&b.c, &uri).await {
            Ok(()) => break,
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "mcp-proxy did not answer a call within 30 s: {e} (see mcp-proxy.log)"
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let script = b.o.dir.join(format!("call-{}.lua", paths.len()));
    std::fs::write(&script, wire::wrk_script(NAME, None)).map_err(|e| e.to_string())?;
    // It prints no version; `scripts/bench.sh` installs 0.6.0.
    let label =
        "mcp-proxy (crates.io, `protocol-2026-07-28`; peer gateway, one HTTP backend)".to_owned();
    paths.push(Path4 {
        label,
        url,
        script,
        tput: Vec::new(),
        lat: Vec::new(),
    });
    Ok(p)
}
