//! `sluice demo-stdio-server` (hidden): the demo's stdio upstream, `notes`, a 2025-11-25 MCP
//! server on stdin/stdout as a stdio package would be. `sluice demo` starts it as a child
//! process (`--upstream notes=stdio:<this binary> demo-stdio-server`).
//!
//! Takes newline-delimited JSON-RPC on stdin; gives answers on stdout: `initialize`, `ping`,
//! `tools/list` (one tool) and `tools/call suggest_title`, which asks the client's model for a
//! title mid-call (`sampling/createMessage`, as a 2025-11-25 stdio server does) and returns it.
//! Refuses every other request with `-32601`; writes nothing else to stdout.

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The tool's description, as listed.
const TOOL: &str = "Suggests a title for a note, asking the client's model (sampling) mid-call.";

/// Serves stdin/stdout until stdin ends.
pub async fn serve() -> std::io::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id").cloned(), msg["method"].as_str()) else {
            continue;
        };
        let answer = match method {
            "initialize" => ok(
                &id,
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "notes", "version": "1"}}),
            ),
            "ping" => ok(&id, json!({})),
            "tools/list" => ok(
                &id,
                json!({"tools": [{"name": "suggest_title", "description": TOOL,
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]}),
            ),
            "tools/call" if msg.pointer("/params/name") == Some(&json!("suggest_title")) => {
                let text = msg
                    .pointer("/params/arguments/text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let title = ask_model(&mut lines, &mut out, &text).await?;
                ok(
                    &id,
                    json!({"content": [{"type": "text", "text": format!("title: {title}")}]}),
                )
            }
            _ => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
            }
        };
        write(&mut out, &answer).await?;
    }
    Ok(())
}

/// Asks the client's model for a title and waits for its answer (other lines meanwhile are
/// notifications of no interest here).
async fn ask_model(
    lines: &mut tokio::io::Lines<BufReader<tokio::io::Stdin>>,
    out: &mut tokio::io::Stdout,
    text: &str,
) -> std::io::Result<String> {
    let ask = json!({"jsonrpc": "2.0", "id": "title-1", "method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Suggest a short title for this note:\n{text}")}}],
        "maxTokens": 20}});
    write(out, &ask).await?;
    while let Some(line) = lines.next_line().await? {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg["id"] == "title-1" {
            let title = msg
                .pointer("/result/content/text")
                .and_then(Value::as_str)
                .unwrap_or("(the model declined)");
            return Ok(title.to_owned());
        }
    }
    Ok("(no answer)".into())
}

fn ok(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

async fn write(out: &mut tokio::io::Stdout, msg: &Value) -> std::io::Result<()> {
    let mut line = msg.to_string().into_bytes();
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await
}
