//! The legacy demo upstream's two tools, each run on its call's own SSE stream.
//!
//! Takes a session of the legacy demo upstream, the call's JSON-RPC id, its argument and the
//! stream's sender; gives the tool's `sampling/createMessage` asks, one at a time on that
//! stream, then its result event. `summarize_repo` asks twice (`pick_files`, then `summarize`)
//! and answers with the files and the summary; `loop_forever` asks for one more idea (`next`)
//! after every answer, forever. Refuses a round-1 answer that is not a JSON array of three
//! known file names, and a refused ask or an answer without text, with a tool error
//! (`isError: true`); ends silently when the client or the session goes away.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::{event, Sessions, FILES};
use crate::demo::upstream::Seen;
use sluice_mcp::method::Method;

/// The `_meta` key by which an ask names the input it fills (Sluice's bridge A reads it to
/// key the `input_required` round); a server writes it as text.
const INPUT_KEY_HINT: &str = "dev.sluice/inputKey";

/// The loop bomb: one more sampling ask after every answer, until the call is cancelled or the
/// client goes away.
pub(super) async fn loop_forever(
    sessions: Sessions,
    sid: String,
    id: Value,
    topic: String,
    out: mpsc::Sender<Bytes>,
    seen: Arc<Seen>,
) {
    for n in 1u64.. {
        seen.note("ask loop_forever");
        let prompt = format!("Idea #{n} about {topic}: give one more idea in a sentence. (I will ask again after your answer.)");
        match ask(&sessions, &sid, &out, "next", prompt).await {
            None => return, // the client went away or the session ended
            Some(Err(why)) => {
                let _ = out
                    .send(event(
                        &json!({"jsonrpc": "2.0", "id": id, "result": tool_error(&why)}),
                    ))
                    .await;
                return;
            }
            Some(Ok(_)) => {}
        }
    }
}

pub(super) fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The tool: two sampling rounds on the call's own stream, then the result.
pub(super) async fn summarize(
    sessions: Sessions,
    sid: String,
    id: Value,
    audience: String,
    out: mpsc::Sender<Bytes>,
) {
    let listing: Vec<String> = FILES.iter().map(|(n, c)| format!("--- {n}\n{c}")).collect();
    let prompt = format!(
        "Pick the three files that best represent this repository; answer with a JSON array of three file names only.\n{}",
        listing.join("\n")
    );
    let result = match ask(&sessions, &sid, &out, "pick_files", prompt).await {
        None => return, // the client went away or the session ended
        Some(Err(why)) => tool_error(&why),
        Some(Ok(answer)) => match chosen(&answer) {
            Err(why) => tool_error(&why),
            Ok(files) => {
                let shown: Vec<String> = FILES
                    .iter()
                    .filter(|(n, _)| files.contains(n))
                    .map(|(n, c)| format!("--- {n}\n{c}"))
                    .collect();
                let prompt = format!("Summarize this repository for {audience} in two sentences, from these files:\n{}", shown.join("\n"));
                match ask(&sessions, &sid, &out, "summarize", prompt).await {
                    None => return,
                    Some(Err(why)) => tool_error(&why),
                    Some(Ok(summary)) => json!({
                        "content": [{"type": "text", "text": format!("Files: {}\n\nSummary for {audience}: {summary}", files.join(", "))}],
                        "structuredContent": {"files": files, "summary": summary}}),
                }
            }
        },
    };
    let _ = out
        .send(event(
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        ))
        .await;
}

/// Sends one `sampling/createMessage` on the call's stream and waits for the client's response:
/// `None` when the client or session went away, `Err` when it refused or gave no text.
async fn ask(
    sessions: &Sessions,
    sid: &str,
    out: &mpsc::Sender<Bytes>,
    key: &str,
    prompt: String,
) -> Option<Result<String, String>> {
    let (tx, rx) = oneshot::channel();
    let ask_id = {
        let mut m = sessions.lock().ok()?;
        let s = m.get_mut(sid)?;
        s.next_ask += 1;
        s.pending.insert(s.next_ask.to_string(), tx);
        s.next_ask
    };
    let req = json!({"jsonrpc": "2.0", "id": ask_id, "method": Method::SamplingCreateMessage.as_str(), "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 300,
        "_meta": {INPUT_KEY_HINT: key}}});
    out.send(event(&req)).await.ok()?;
    let reply = tokio::select! { r = rx => r.ok()?, _ = out.closed() => return None };
    if let Some(e) = reply.get("error") {
        return Some(Err(format!(
            "the client refused sampling/createMessage ({key}): {}",
            e["message"]
        )));
    }
    let content = &reply["result"]["content"];
    let text = content
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == "text"))
        .unwrap_or(content)["text"]
        .as_str();
    Some(
        text.map(str::to_owned)
            .ok_or_else(|| format!("the model's answer to {key} has no text content")),
    )
}

/// Three distinct known file names from a JSON array, or what is wrong with the answer.
fn chosen(answer: &str) -> Result<Vec<&'static str>, String> {
    let known: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
    let refuse = |why: String| {
        Err(format!(
            "pick_files: {why}; expected a JSON array of three file names from: {}",
            known.join(", ")
        ))
    };
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(answer.trim()) else {
        return refuse(format!("the answer {answer:?} is not a JSON array"));
    };
    let mut files = Vec::new();
    for item in &items {
        match known.iter().find(|k| Some(**k) == item.as_str()) {
            Some(k) if !files.contains(k) => files.push(*k),
            Some(k) => return refuse(format!("{k} is named twice")),
            None => return refuse(format!("{item} is not a file of this repository")),
        }
    }
    if files.len() != 3 {
        return refuse(format!("{} files were named", files.len()));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::chosen;

    #[test]
    fn round_one_answers_must_name_three_known_files() {
        assert_eq!(
            chosen(r#" ["README.md", "src/store.rs", "Cargo.toml"] "#).unwrap(),
            ["README.md", "src/store.rs", "Cargo.toml"]
        );
        assert!(chosen("README.md, Cargo.toml")
            .unwrap_err()
            .contains("not a JSON array"));
        assert!(chosen(r#"["README.md", "secrets.txt", "LICENSE"]"#)
            .unwrap_err()
            .contains("\"secrets.txt\" is not a file"));
        assert!(chosen(r#"["README.md", "LICENSE"]"#)
            .unwrap_err()
            .contains("2 files"));
        assert!(chosen(r#"["LICENSE", "LICENSE", "README.md"]"#)
            .unwrap_err()
            .contains("named twice"));
    }
}
