//! 2026-07-28 stdio servers on their own wire (issue 12): Sluice probes `server/discover` over
//! stdio first, and serves a modern server from one process for every principal, requests
//! multiplexed by ids of its own; a 2025-11-25 server found by the same probe gets its
//! sessions' processes as before. Against the `mcp==2.3.0` server and server-filesystem, and a
//! hostile modern server for what no real one does.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::stdio::{data_dir, filesystem, processes_with, read_call};
use crate::support::call::{http, sample, Call};
use crate::support::gateway::{keys, Gateway, Upstream, ALICE_KEY, BOB_KEY};
use crate::support::peers::{self, peer_env, script};
use sluice::upstream::Wire;

/// Sluice with bridge A's key, names always prefixed, every stdio upstream probed as configured
/// (`era` left to the probe).
fn gateway() -> Gateway {
    Gateway::bridge(keys::BRIDGE_A)
        .named("stdio_modern.toml")
        .bridge_key("park_ms", 10_000)
        .top("prefix", "always")
}

/// `tests/peers/py_upstream.py` (`mcp==2.3.0`, both eras) over stdio; `tag` marks its processes.
fn py2_stdio(tag: &str) -> Upstream {
    let py = peer_env("SLUICE_PY2").display().to_string();
    Upstream::stdio(
        "py2",
        &[
            py,
            script("py_upstream.py").display().to_string(),
            "--stdio".into(),
            tag.into(),
        ],
    )
    .key("spare_processes", 0)
}

/// The hostile 2026-07-28 server, logging what it saw to `log`.
fn hostile(log: &Path) -> Upstream {
    let cmd = [
        "python3".to_owned(),
        script("hostile_modern_stdio.py").display().to_string(),
        log.display().to_string(),
    ];
    Upstream::stdio("h", &cmd).key("spare_processes", 0)
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_2_3_server_over_stdio_is_one_process_for_every_principal_on_the_modern_wire() {
    let tag = format!("--tag={}", crate::support::unique("py2-stdio"));
    let gw = gateway()
        .two_keys()
        .upstream_spec(py2_stdio(&tag))
        .start()
        .await;
    let status = gw.gateway.catalog.upstreams[0].status();
    assert_eq!(
        status.wire,
        Wire::Modern,
        "server/discover answered over stdio: {status:?}"
    );
    assert!(
        status.legacy_too(),
        "mcp==2.3.0 answers initialize too: {status:?}"
    );
    // The 2025-11-25 check's own process is ended; the modern one serves everyone.
    crate::support::eventually("one process left", || processes_with(&tag).len() == 1).await;
    let shared = processes_with(&tag);

    // Both principals at once, every call with the same JSON-RPC id: each gets its own answer.
    let url = gw.url();
    let mut running = Vec::new();
    for i in 0..8 {
        for (who, key) in [("alice", ALICE_KEY), ("bob", BOB_KEY)] {
            let text = format!("{who}-{i}");
            let call = Call::new("py2__echo", json!({"text": text}))
                .caps(json!({}))
                .token(key)
                .id(json!(1));
            let url = url.clone();
            running.push(tokio::spawn(async move {
                (text, call.send(&http(), &url, json!({})).await)
            }));
        }
    }
    for r in running {
        let (want, reply) = r.await.expect("a call task");
        assert_eq!(reply.msg["id"], json!(1), "{reply:?}");
        assert!(reply.text().contains(&want), "{want}: {reply:?}");
    }
    assert_eq!(
        processes_with(&tag),
        shared,
        "every call on the one process"
    );

    // Its sampling tool asks the 2026-07-28 way: the round is the server's own, sealed by Sluice.
    let call = Call::new("py2__ask_llm", json!({"prompt": "stdio-modern"}))
        .caps(json!({"sampling": {}}))
        .token(ALICE_KEY);
    let r1 = call.send(&http(), &url, json!({})).await;
    let (key, ask) = r1
        .input_requests()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .expect("an ask");
    assert_eq!(ask["method"], "sampling/createMessage", "{ask}");
    let done = call
        .send(
            &http(),
            &url,
            json!({"requestState": r1.state(), "inputResponses": {key: sample("FROM-MODEL", "m")}}),
        )
        .await;
    assert!(done.text().contains("llm said: FROM-MODEL"), "{done:?}");

    // Killed, it is started again by the next call.
    for pid in &shared {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let spec = gw.gateway.catalog.upstreams[0]
        .stdio
        .clone()
        .expect("a stdio upstream");
    crate::support::eventually("the killed process was seen to exit", || {
        spec.running() == 0
    })
    .await;
    let again = Call::new("py2__add", json!({"a": 2, "b": 3}))
        .caps(json!({}))
        .token(BOB_KEY)
        .send(&http(), &url, json!({}))
        .await;
    assert_eq!(again.text(), "5");
    assert_eq!(processes_with(&tag).len(), 1);
    gw.stop().await;
    assert_eq!(
        processes_with(&tag),
        Vec::<u32>::new(),
        "shutdown leaves no child"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_server_over_stdio_is_found_by_the_same_probe_and_its_probed_process_ended() {
    let dir = data_dir("auto-probe");
    let gw = gateway()
        .upstream_spec(filesystem("files", &dir).key("spare_processes", 0))
        .start()
        .await;
    let status = gw.gateway.catalog.upstreams[0].status();
    assert_eq!(
        status.wire,
        Wire::Legacy,
        "server/discover answered -32601: {status:?}"
    );
    assert!(status.healthy, "{status:?}");
    // The process server/discover went to was ended: Sluice's own session's is the one left.
    let marker = dir.display().to_string();
    crate::support::eventually("only Sluice's own session's process runs", || {
        processes_with(&marker).len() == 1
    })
    .await;
    assert_eq!(
        read_call(&dir)
            .send(&http(), &gw.url(), json!({}))
            .await
            .text(),
        "hello from auto-probe\n"
    );
    assert_eq!(
        processes_with(&marker).len(),
        2,
        "and the client's session's"
    );
    gw.stop().await;
    assert_eq!(
        processes_with(&dir.display().to_string()),
        Vec::<u32>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_modern_stdio_server_gets_ids_and_tokens_of_sluices_own_and_cannot_stall_or_crash_it(
) {
    let log = peers::scratch().join(format!("{}.log", crate::support::unique("hostile-modern")));
    let gw = gateway()
        .timeout("response_ms", 1500)
        .limit("max_response_bytes", 1 << 20)
        .upstream_spec(hostile(&log))
        .start()
        .await;
    assert_eq!(gw.gateway.catalog.upstreams[0].status().wire, Wire::Modern);
    let url = gw.url();
    let pid = || async {
        Call::new("h__pid", json!({}))
            .caps(json!({}))
            .send(&http(), &url, json!({}))
            .await
            .text()
    };
    let first = pid().await;

    // Progress comes back under the client's own token; the server saw one of Sluice's.
    let got = Call::new("h__take", json!({}))
        .caps(json!({}))
        .with_progress(&http(), &url, "client-token")
        .await;
    assert_eq!(got[0]["method"], "notifications/progress", "{got:?}");
    assert_eq!(got[0]["params"]["progressToken"], "client-token", "{got:?}");
    assert!(got.last().is_some_and(|m| m["id"] == json!(1)), "{got:?}");
    // A call that gave no token gets none added: no progress, one JSON answer.
    let plain = Call::new("h__take", json!({}))
        .caps(json!({}))
        .with_progress_of(&http(), &url, None)
        .await;
    assert!(
        plain.len() == 1
            && plain[0]["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("took ")),
        "{plain:?}"
    );
    let tokens: Vec<String> = log_lines(&log)
        .into_iter()
        .filter(|l| l.starts_with("token "))
        .collect();
    assert!(
        tokens.len() == 2 && tokens[0].starts_with("token sluice-") && tokens[1] == "token None",
        "{tokens:?}"
    );

    // A server→client ping is answered.
    let pong = Call::new("h__ping_me", json!({}))
        .caps(json!({}))
        .send(&http(), &url, json!({}))
        .await;
    assert_eq!(pong.text(), "pong: {}");

    // A client that goes away: the call is cancelled on the process (notifications/cancelled).
    let hold = Call::new("h__hold", json!({}))
        .caps(json!({}))
        .request(&http(), &url, json!({}));
    let _ = tokio::time::timeout(Duration::from_millis(300), async {
        hold.send().await.map(|r| r.bytes())
    })
    .await;
    crate::support::eventually("the held call arrived", || {
        log_lines(&log).iter().any(|l| l.starts_with("held "))
    })
    .await;
    let held = log_lines(&log)
        .into_iter()
        .find_map(|l| l.strip_prefix("held ").map(str::to_owned))
        .expect("held");
    let cancelled = format!("cancelled {held}");
    crate::support::eventually("the held call was cancelled", || {
        log_lines(&log).contains(&cancelled)
    })
    .await;

    // A line over the bound is dropped: the call it belonged to times out, the process goes on.
    let huge = Call::new("h__huge", json!({}))
        .caps(json!({}))
        .send(&http(), &url, json!({}))
        .await;
    assert!(
        huge.msg["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not answer within 1500 ms")),
        "{huge:?}"
    );
    assert_eq!(pid().await, first, "the same process");

    // Garbage on stdout: the process is ended, the upstream marked unhealthy saying why.
    let bad = Call::new("h__garbage", json!({}))
        .caps(json!({}))
        .send(&http(), &url, json!({}))
        .await;
    let msg = bad.msg["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains("upstream 'h' stopped") && msg.contains("not JSON-RPC"),
        "{bad:?}"
    );
    let why = gw.gateway.catalog.upstreams[0]
        .status()
        .error
        .clone()
        .unwrap_or_default();
    assert!(
        why.contains("not JSON-RPC") && !why.contains("this is not"),
        "the reason, never the bytes: {why}"
    );
    // The next probe starts a new process and finds it healthy again.
    assert!(
        gw.gateway
            .catalog
            .link
            .probe(&gw.gateway.catalog.upstreams[0])
            .await
            .healthy
    );
    assert_ne!(pid().await, first, "a new process serves the next call");
    gw.stop().await;
}
