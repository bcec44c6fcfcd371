//! A 2025-11-25 stdio server's processes do not multiply (issue 29, point 4). Against the real
//! FastMCP `mcp==1.30.0` server (tests/peers/py1_upstream.py) over stdio, whose `counter`
//! answers `pid P call N` (its state is per process), reached by raw 2025-11-25 clients through
//! bridge B, one client session per call as `langchain-mcp-adapters` opens them, each listing
//! every kind at once first:
//!
//! - one principal's ten client sessions, one after the other, are served by one process (the
//!   same pid, its count going on: 1 to 10), and Sluice's children (read from the process tree)
//!   grow by that one process (Sluice's own lists, at once, wait for its one process);
//! - two principals never share one: each has its own process and its own count;
//! - an idle process (and an unused warm spare) ends after the upstream's `idle_ms`; the
//!   principal's next session gets a new process, its count from 1.

use std::path::PathBuf;

use serde_json::json;

use crate::support::client::Req;
use crate::support::gateway::{keys, Gateway, Upstream, ALICE_KEY, BOB_KEY};
use crate::support::legacy_client::Legacy;
use crate::support::peers::{self, peer_env, script};

/// The pids of this process's children whose command line holds `marker` (Sluice runs in
/// this process: its stdio servers are its children).
fn children_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesized command name: state, then the parent's pid.
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok());
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(me) && String::from_utf8_lossy(&cmdline).contains(marker) {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

/// `py1` over stdio, its command line marked by its events directory (the marker).
fn py1(tag: &str, keys: &[(&str, i64)]) -> (Upstream, String) {
    let events: PathBuf = peers::scratch().join(format!("stdio-pool-{tag}"));
    let py = peer_env("SLUICE_PY1").display().to_string();
    let mut u = Upstream::stdio(
        "py1",
        &[
            py,
            script("py1_upstream.py").display().to_string(),
            "--stdio".into(),
            "--events".into(),
            events.display().to_string(),
        ],
    );
    for (k, v) in keys {
        u = u.key(k, *v);
    }
    (u, events.display().to_string())
}

/// Sluice in front of `up`, alice and bob its principals.
async fn gateway(up: Upstream) -> sluice::Running {
    Gateway::bridge(keys::BRIDGE_B)
        .named("stdio_pool.toml")
        .top("prefix", "always")
        .two_keys()
        .upstream_spec(up)
        .all_legacy()
        .start()
        .await
}

/// One client session of `key` as a client opens one: initialize, every list at once (the
/// Inspector lists so; each is Sluice's own request upstream), one `counter` call, DELETE.
/// Gives (pid, count).
async fn session(url: &str, key: &str) -> (u32, u32) {
    let mut c = Legacy::with(&reqwest::Client::new(), url, Some(key));
    c.initialize(json!({})).await;
    let (t, p, r) = tokio::join!(
        c.call(2, "tools/list", json!({})),
        c.call(3, "prompts/list", json!({})),
        c.call(4, "resources/list", json!({}))
    );
    for (status, msg) in [t, p, r] {
        assert!(
            status == 200 && msg.get("result").is_some(),
            "{status} {msg}"
        );
    }
    let (status, msg) = c
        .call(
            1,
            "tools/call",
            json!({"name": "py1__counter", "arguments": {}}),
        )
        .await;
    assert_eq!(status, 200, "{msg}");
    let text = msg["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {msg}"))
        .to_owned();
    assert!(
        c.delete().await.status().is_success(),
        "DELETE the client session"
    );
    parse(&text)
}

/// `pid P call N` → (P, N).
fn parse(text: &str) -> (u32, u32) {
    let w: Vec<&str> = text.split_whitespace().collect();
    match w.as_slice() {
        ["pid", p, "call", n] => (p.parse().expect("a pid"), n.parse().expect("a count")),
        _ => panic!("not `pid P call N`: {text:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_ten_client_sessions_one_after_another_are_served_by_one_process() {
    let (up, marker) = py1("ten", &[("spare_processes", 0)]);
    let gw = gateway(up).await;
    let before = children_with(&marker);
    assert_eq!(
        before.len(),
        1,
        "Sluice's own session (its probe and lists): {before:?}"
    );
    let mut pids = Vec::new();
    for i in 1..=10u32 {
        let (pid, count) = session(&gw.url(), ALICE_KEY).await;
        assert_eq!(
            count, i,
            "session {i} went to a process that served {count} calls (pid {pid}; before: {pids:?})"
        );
        pids.push(pid);
    }
    pids.dedup();
    assert_eq!(pids.len(), 1, "alice's sessions were served by {pids:?}");
    let after = children_with(&marker);
    let new: Vec<u32> = after
        .iter()
        .copied()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(
        new, pids,
        "Sluice's children grew by alice's one process: {before:?} -> {after:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_principals_never_share_a_process() {
    let (up, marker) = py1("two", &[("spare_processes", 0)]);
    let gw = gateway(up).await;
    let (mut alice, mut bob) = (Vec::new(), Vec::new());
    for i in 1..=3u32 {
        let a = session(&gw.url(), ALICE_KEY).await;
        let b = session(&gw.url(), BOB_KEY).await;
        assert_eq!(
            (a.1, b.1),
            (i, i),
            "each principal's process counts its own calls only: alice {a:?}, bob {b:?}"
        );
        alice.push(a.0);
        bob.push(b.0);
    }
    alice.dedup();
    bob.dedup();
    assert_eq!(
        (alice.len(), bob.len()),
        (1, 1),
        "one process each: alice {alice:?}, bob {bob:?}"
    );
    assert_ne!(alice, bob, "alice and bob shared a process");
    let children = children_with(&marker);
    assert!(
        children.contains(&alice[0]) && children.contains(&bob[0]) && children.len() == 3,
        "{children:?}: alice {alice:?}, bob {bob:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_process_and_an_unused_spare_end_after_idle_ms() {
    let (up, marker) = py1("idle", &[("spare_processes", 1), ("idle_ms", 1000)]);
    let gw = gateway(up).await;
    let (pid, count) = session(&gw.url(), ALICE_KEY).await;
    assert_eq!(count, 1);
    // Alice's process, Sluice's own and the warm spare started when alice's began: each unused
    // for idle_ms, each ended (the spare is not replaced until a session next starts).
    // (A process that exited is a zombie, its command line empty, until Sluice reaps it.)
    let spec = gw.gateway.catalog.upstreams[0]
        .stdio
        .clone()
        .expect("a stdio upstream");
    crate::support::eventually("every idle process of the upstream ended", || {
        children_with(&marker).is_empty() && spec.running() == 0
    })
    .await;
    // Alice's next session gets a new process: the state of the old one is gone with it.
    let (again, count) = session(&gw.url(), ALICE_KEY).await;
    assert_ne!(again, pid);
    assert_eq!(count, 1, "a new process counts from 1");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluices_own_lists_of_every_kind_at_once_share_its_one_process() {
    let (up, marker) = py1("lists", &[("spare_processes", 0)]);
    let gw = Gateway::bridge(keys::BRIDGE_B)
        .named("stdio_pool.toml")
        .top("prefix", "always")
        .upstream_spec(up)
        .all_legacy()
        .start()
        .await;
    assert_eq!(children_with(&marker).len(), 1, "Sluice's own session");
    // A client that connects lists every kind at once (the Inspector does): each list is
    // Sluice's own request, on its own session.
    for round in 0..3 {
        let lists = [
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
        ]
        .map(|m| {
            let url = gw.url();
            tokio::spawn(async move { Req::new(m).id(json!(round)).send(&url).await.json() })
        });
        for l in lists {
            let answer = l.await.expect("a list");
            assert!(answer.get("result").is_some(), "{answer}");
        }
    }
    let children = children_with(&marker);
    assert_eq!(
        children.len(),
        1,
        "Sluice's own lists started more processes: {children:?}"
    );
    gw.stop().await;
}
