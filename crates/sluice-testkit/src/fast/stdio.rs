//! The benchmark's 2025-11-25 stdio server, started by Sluice as a child process (`stdio-upstream`).
//!
//! Takes newline-delimited JSON-RPC on stdin; gives on stdout: `initialize` (2025-11-25),
//! `tools/list` (one tool, `echo`), `tools/call echo` (the fixed ~1 KiB text of the HTTP mock)
//! and `ping`; `-32601` for every other request, nothing for notifications. Ends when stdin
//! ends (Sluice ends it so).

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Serves stdin/stdout until stdin ends.
pub async fn serve() -> Result<(), String> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let text = super::arg_text();
    while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id").cloned(), msg["method"].as_str()) else {
            continue;
        };
        let answer = match method {
            "initialize" => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "bench-stdio", "version": "1"}}})
            }
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "tools/list" => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo", "description": "Echo a text",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}})
            }
            "tools/call" => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
            }
            _ => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
            }
        };
        let mut bytes = answer.to_string().into_bytes();
        bytes.push(b'\n');
        out.write_all(&bytes).await.map_err(|e| e.to_string())?;
        out.flush().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}
