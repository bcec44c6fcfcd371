//! Load while something changes under it: clients calling a tool and listing tools without
//! pause, every answer checked to be a result, the failures kept with their text.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::client::Req;
use super::modern::{tool, Mock, Reply, Spec};
use super::WAIT;

/// `tools/call` of `name` with no arguments.
pub(crate) fn call(name: &str) -> Req {
    Req::new("tools/call").params(json!({"name": name, "arguments": {}}))
}

/// A load's `n`th `tools/call` of `name`: arguments of its own, as a real client's calls have
/// (the same call again and again is a loop the identical-call breaker stops).
fn nth_call(name: &str, n: usize) -> Req {
    Req::new("tools/call").params(json!({"name": name, "arguments": {"n": n}}))
}

/// The public tool names `tools/list` gives.
pub(crate) async fn tool_names(url: &str) -> Vec<String> {
    let list = Req::new("tools/list").send(url).await.result(&json!(1));
    let tools = list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"));
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// A mock upstream `name` listing `echo` and `slow`; `slow` answers "slow done" once the gate
/// given back is set to `true` (a call held in flight across a change).
pub(crate) async fn with_slow_tool(name: &str) -> (Mock, tokio::sync::watch::Sender<bool>) {
    let (gate, open) = tokio::sync::watch::channel(false);
    let mock = Spec::new(name)
        .tools(vec![tool("echo"), tool("slow")])
        .on(move |s| {
            (s.tool() == "slow").then(|| {
                Reply::gate(
                    open.clone(),
                    json!({"content": [{"type": "text", "text": "slow done"}]}),
                )
            })
        })
        .start()
        .await;
    (mock, gate)
}

/// Clients calling `tool` and listing tools in a loop until stopped; every answer must be a
/// result (any failure is recorded with its text).
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    /// Requests answered, per client.
    each: Arc<Vec<AtomicUsize>>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    /// `clients` clients on `url`, half calling `tool`, half listing; each request bearing
    /// `bearer` when given.
    pub(crate) fn start(url: &str, tool: &str, bearer: Option<&str>, clients: usize) -> Load {
        let (stop, served) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let each: Arc<Vec<AtomicUsize>> =
            Arc::new((0..clients).map(|_| AtomicUsize::new(0)).collect());
        let tasks = (0..clients)
            .map(|i| {
                let (url, tool, stop, served, each) = (
                    url.to_owned(),
                    tool.to_owned(),
                    stop.clone(),
                    served.clone(),
                    each.clone(),
                );
                let bearer = bearer.map(|b| format!("Bearer {b}"));
                tokio::spawn(async move {
                    let mut failures = Vec::new();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let req = if i % 2 == 0 {
                            nth_call(&tool, n)
                        } else {
                            Req::new("tools/list")
                        };
                        let req = match &bearer {
                            Some(b) => req.header("authorization", b),
                            None => req,
                        };
                        let r = req.send(&url).await;
                        let v: Value = serde_json::from_str(&r.text).unwrap_or(Value::Null);
                        if r.status != 200 || v.get("result").is_none() {
                            failures.push(format!("{} {}", r.status, r.text));
                        }
                        served.fetch_add(1, Ordering::Relaxed);
                        each[i].fetch_add(1, Ordering::Relaxed);
                    }
                    failures
                })
            })
            .collect();
        Load {
            stop,
            served,
            each,
            tasks,
        }
    }

    /// Waits until every client has had a request answered that it sent after this call (two
    /// more answers each: the one in flight, then one begun after it).
    pub(crate) async fn settled(&self) {
        let marks: Vec<usize> = self
            .each
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        tokio::time::timeout(WAIT, async {
            while self
                .each
                .iter()
                .zip(&marks)
                .any(|(c, m)| c.load(Ordering::Relaxed) < m + 2)
            {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("every client keeps being served");
    }

    /// Waits until `n` more requests were served (so the load overlaps what comes next).
    pub(crate) async fn past(&self, n: usize) {
        let target = self.served.load(Ordering::Relaxed) + n;
        tokio::time::timeout(WAIT, async {
            while self.served.load(Ordering::Relaxed) < target {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the load keeps being served");
    }

    /// Stops it; asserts nothing failed and gives how many were served.
    pub(crate) async fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let mut failures = Vec::new();
        for t in self.tasks {
            failures.extend(t.await.expect("a load task"));
        }
        assert!(
            failures.is_empty(),
            "{} request(s) failed during the reload, first: {}",
            failures.len(),
            failures[0]
        );
        self.served.load(Ordering::Relaxed)
    }
}
