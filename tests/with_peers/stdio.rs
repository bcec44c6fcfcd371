//! stdio upstreams (issue 12): real servers nobody here wrote, started by Sluice as child
//! processes, served to 2026-07-28 clients with their mid-call asks intact; restarted when
//! killed; ended at shutdown; bounded and silent when hostile.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::call::{http, sample, Call};
use crate::support::client::Req;
use crate::support::gateway::{keys, Gateway, Upstream};
use crate::support::peers::{self, peer_env, script, Run};
use crate::support::rmcp_client;

/// The pids of running processes whose command line holds `marker`, not counting this one.
pub(super) fn processes_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// A fresh folder holding `a.txt`, unique to this test (its path marks the processes serving it).
pub(super) fn data_dir(tag: &str) -> PathBuf {
    let dir = peers::scratch().join(format!("fs-{tag}"));
    std::fs::create_dir_all(&dir).expect("create the data folder");
    std::fs::write(dir.join("a.txt"), format!("hello from {tag}\n")).expect("write a.txt");
    dir
}

/// `@modelcontextprotocol/server-filesystem` on `dir`, over stdio.
pub(super) fn filesystem(name: &str, dir: &Path) -> Upstream {
    let node = peer_env("SLUICE_NODE22");
    Upstream::stdio(
        name,
        &[
            node.to_string_lossy().into_owned(),
            peer_env("SLUICE_FILESYSTEM").display().to_string(),
            dir.display().to_string(),
        ],
    )
}

/// `tests/peers/py1_upstream.py` (FastMCP `mcp==1.30.0`) over stdio, recording to `events`.
fn py1_stdio(events: &Path) -> Upstream {
    let py = peer_env("SLUICE_PY1").display().to_string();
    Upstream::stdio(
        "py1",
        &[
            py,
            script("py1_upstream.py").display().to_string(),
            "--stdio".into(),
            "--events".into(),
            events.display().to_string(),
        ],
    )
}

/// Sluice with bridge A's key, names always prefixed; the probe's checks are the caller's.
fn gateway() -> Gateway {
    Gateway::bridge(keys::BRIDGE_A)
        .named("stdio.toml")
        .bridge_key("park_ms", 10_000)
        .top("prefix", "always")
}

/// The line `line` is in the file at `path` (a peer's event file), within the tests' wait.
async fn file_has_line(path: &Path, line: &str) {
    crate::support::eventually(&format!("{} holds {line:?}", path.display()), || {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .any(|l| l == line)
    })
    .await;
}

/// Calls declare no roots: these servers ask a client that does for its roots right after the
/// handshake, which would make the first call on a fresh process a roots round.
pub(super) fn read_call(dir: &Path) -> Call {
    Call::new("files__read_text_file", json!({"path": dir.join("a.txt")})).caps(json!({}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_filesystem_over_stdio_lists_and_reads_a_folder() {
    let dir = data_dir("list-read");
    let gw = gateway()
        .upstream_spec(filesystem("files", &dir))
        .all_legacy()
        .start()
        .await;
    let list = Req::new("tools/list")
        .send(&gw.url())
        .await
        .result(&json!(1));
    let names: Vec<&str> = list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for want in [
        "files__read_text_file",
        "files__list_directory",
        "files__write_file",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let text = read_call(&dir)
        .send(&http(), &gw.url(), json!({}))
        .await
        .text();
    assert_eq!(text, "hello from list-read\n");
    let listing = Call::new("files__list_directory", json!({"path": dir}))
        .caps(json!({}))
        .send(&http(), &gw.url(), json!({}))
        .await
        .text();
    assert!(listing.contains("[FILE] a.txt"), "{listing}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_serves_sampling_and_elicitation_rounds_to_sdk_clients() {
    let node = peer_env("SLUICE_NODE22").display().to_string();
    let everything = Upstream::stdio(
        "everything",
        &[
            node,
            peer_env("SLUICE_EVERYTHING").display().to_string(),
            "stdio".into(),
        ],
    );
    // Unprefixed, as the SDK clients' plans name the tools.
    let gw = gateway()
        .top("prefix", "auto")
        .upstream_spec(everything)
        .all_legacy()
        .start()
        .await;
    let plan = json!({
        "url": gw.url(),
        "callbacks": ["sampling", "elicitation"],
        "calls": [
            {"name": "trigger-sampling-request", "arguments": {"prompt": "stdio-q", "maxTokens": 20}, "expect": [
                "LLM sampling result:", "ECHO[Resource trigger-sampling-request context: stdio-q]", "fake-llm-py2",
            ]},
            {"name": "trigger-elicitation-request", "arguments": {}, "expect": ["User provided the requested information", "yes-from-py2"]},
        ],
    });
    let Run {
        status,
        summary,
        transcript,
        ..
    } = peers::py2_bridge_client(&plan).await;
    assert!(
        status.success(),
        "the Python client's checks failed: {:#}\n{transcript}",
        summary["failures"]
    );
    let asked = |i: usize| -> Vec<Value> {
        summary["calls"][i]["asked"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(asked(0).len(), 1, "one sampling round: {transcript}");
    assert_eq!(asked(1).len(), 1, "one elicitation round: {transcript}");

    // The rmcp client too, and progress from a long-running operation.
    let asked = rmcp_client::Asked::default();
    let client = rmcp_client::connect(&gw.url(), asked.clone(), false).await;
    let (text, is_error) = rmcp_client::call(
        &client,
        "trigger-sampling-request",
        json!({"prompt": "rs-stdio", "maxTokens": 20}),
    )
    .await;
    assert!(
        !is_error && text.contains("ECHO-RS[Resource trigger-sampling-request context: rs-stdio]"),
        "{text}"
    );
    assert_eq!(
        asked.take(),
        ["sampling: Resource trigger-sampling-request context: rs-stdio"]
    );
    let _ = client.cancel().await;
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        0,
        "nothing stays parked after complete calls"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_relays_progress() {
    let node = peer_env("SLUICE_NODE22").display().to_string();
    let everything = Upstream::stdio(
        "everything",
        &[
            node,
            peer_env("SLUICE_EVERYTHING").display().to_string(),
            "stdio".into(),
        ],
    );
    let gw = gateway()
        .upstream_spec(everything)
        .all_legacy()
        .start()
        .await;
    let call = Call::new(
        "everything__trigger-long-running-operation",
        json!({"duration": 1, "steps": 3}),
    )
    .caps(json!({}));
    let resp = call.with_progress(&http(), &gw.url(), "p-stdio").await;
    let progress: Vec<Value> = resp
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].clone())
        .collect();
    assert_eq!(progress, [json!(1), json!(2), json!(3)], "{resp:?}");
    assert!(
        resp.iter().all(|m| m["method"] != "notifications/progress"
            || m["params"]["progressToken"] == "p-stdio"),
        "{resp:?}"
    );
    let last = resp.last().expect("a final message");
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_fastmcp_1_30_over_stdio_completes_two_sampling_rounds_and_an_elicitation() {
    let events = peers::scratch().join("py1-stdio-events");
    let gw = gateway()
        .upstream_spec(py1_stdio(&events))
        .all_legacy()
        .start()
        .await;
    let first = Call::new(
        "py1__two_rounds",
        json!({"topic": "stdio", "tag": "stdio-two"}),
    );
    let r1 = first.send(&http(), &gw.url(), json!({})).await;
    let (key, ask) = r1
        .input_requests()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .expect("one ask");
    assert_eq!(ask["method"], "sampling/createMessage", "{ask}");
    let r2 = first
        .send(
            &http(),
            &gw.url(),
            json!({"requestState": r1.state(), "inputResponses": {key: sample("ONE", "m")}}),
        )
        .await;
    let key2 = r2
        .input_requests()
        .keys()
        .next()
        .cloned()
        .expect("a second ask");
    let done = first
        .send(
            &http(),
            &gw.url(),
            json!({"requestState": r2.state(), "inputResponses": {key2: sample("TWO", "m")}}),
        )
        .await;
    let text = done.text();
    assert!(
        text.contains("first: ONE") && text.contains("second: TWO"),
        "{text}"
    );
    let lines = std::fs::read_to_string(events.join("stdio-two")).unwrap_or_default();
    assert_eq!(lines.lines().collect::<Vec<_>>(), ["start", "done"]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_stdio_server_is_started_again_and_shutdown_leaves_no_process() {
    let dir = data_dir("kill-restart");
    let marker = dir.display().to_string();
    let gw = gateway()
        .upstream_spec(filesystem("files", &dir))
        .all_legacy()
        .start()
        .await;
    assert_eq!(
        read_call(&dir)
            .send(&http(), &gw.url(), json!({}))
            .await
            .text(),
        "hello from kill-restart\n"
    );
    let before = processes_with(&marker);
    assert!(!before.is_empty(), "the server runs as a child process");
    for pid in &before {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status();
    }
    // Sluice has seen them exit (a killed process is a zombie until its supervisor reaps it).
    let spec = gw.gateway.catalog.upstreams[0]
        .stdio
        .clone()
        .expect("a stdio upstream");
    crate::support::eventually("Sluice saw the killed processes exit", || {
        spec.running() == 0
    })
    .await;
    // The next call starts a new process and succeeds.
    assert_eq!(
        read_call(&dir)
            .send(&http(), &gw.url(), json!({}))
            .await
            .text(),
        "hello from kill-restart\n"
    );
    let after = processes_with(&marker);
    assert!(
        !after.is_empty() && after.iter().all(|p| !before.contains(p)),
        "new processes: {before:?} -> {after:?}"
    );
    gw.stop().await;
    // stop() waits for every child to exit (and reaps it): none is left, not even a zombie.
    assert_eq!(
        processes_with(&marker),
        Vec::<u32>::new(),
        "processes left after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_way_when_the_process_dies_fails_naming_the_upstream() {
    let events = peers::scratch().join("py1-stdio-die");
    let gw = gateway()
        .upstream_spec(py1_stdio(&events))
        .all_legacy()
        .start()
        .await;
    let marker = events.display().to_string();
    let call = Call::new("py1__slow", json!({"ms": 60_000, "tag": "stdio-die"}));
    let url = gw.url();
    let pending = tokio::spawn(async move { call.send(&http(), &url, json!({})).await });
    file_has_line(&events.join("stdio-die"), "start").await;
    for pid in processes_with(&marker) {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status();
    }
    let reply = pending.await.expect("the call task");
    let msg = reply.msg["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reply.status >= 500 && msg.contains("upstream 'py1' stopped: its process exited"),
        "{reply:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_writing_garbage_or_an_oversized_line_to_stdout_is_marked_unhealthy_without_its_bytes(
) {
    let secret = crate::support::unique("stdout");
    let garbage = format!("echo 'not json {secret}'; sleep 30");
    let huge = "python3 -c \"print('{' + 'x' * 5000)\"; sleep 30";
    let gw = gateway()
        .limit("max_response_bytes", 1024)
        .upstream_spec(Upstream::stdio("garbage", &["sh", "-c", &garbage]))
        .upstream_spec(Upstream::stdio("huge", &["sh", "-c", huge]))
        .unchecked()
        .start()
        .await;
    let status = |name: &str| {
        gw.gateway
            .catalog
            .upstreams
            .iter()
            .find(|u| u.name == name)
            .map(|u| u.status())
            .expect("upstream")
    };
    let g = status("garbage");
    let why = g.error.clone().unwrap_or_default();
    assert!(
        !g.healthy && why.contains("not JSON-RPC") && why.contains("garbage"),
        "{why}"
    );
    assert!(
        !why.contains(&secret),
        "the error quotes the server's bytes: {why}"
    );
    let h = status("huge");
    let why = h.error.clone().unwrap_or_default();
    assert!(!h.healthy && why.contains("over 1024 bytes"), "{why}");
    crate::support::logs::wait_warning(&["upstream broke the protocol", "garbage"]).await;
    assert!(
        !crate::support::logs::contains(&secret),
        "the server's stdout reached Sluice's log"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_stderr_goes_to_its_file_and_never_to_sluices_log() {
    let dir = data_dir("stderr");
    let secret = crate::support::unique("stderr");
    let log = peers::scratch().join("files-stderr.log");
    let node = peer_env("SLUICE_NODE22").display().to_string();
    let fs = peer_env("SLUICE_FILESYSTEM").display().to_string();
    let shell = format!("echo '{secret}' >&2; exec \"$0\" \"$@\"");
    let up = Upstream::stdio(
        "files",
        &[
            "sh".to_owned(),
            "-c".into(),
            shell,
            node,
            fs,
            dir.display().to_string(),
        ],
    )
    .key("stderr", format!("file:{}", log.display()))
    .key(
        "env",
        toml::Value::Table(toml::map::Map::from_iter([(
            "CANARY_ENV".to_owned(),
            toml::Value::from("set"),
        )])),
    );
    let gw = gateway().upstream_spec(up).all_legacy().start().await;
    assert_eq!(
        read_call(&dir)
            .send(&http(), &gw.url(), json!({}))
            .await
            .text(),
        "hello from stderr\n"
    );
    crate::support::eventually("the stderr file holds the server's line", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&secret)
    })
    .await;
    assert!(
        !crate::support::logs::contains(&secret),
        "the server's stderr reached Sluice's log"
    );
    gw.stop().await;
}

/// `tests/peers/hostile_stdio.py MODE MARKER` as a stdio upstream, with no warm spare.
fn hostile(name: &str, mode: &str, marker: &Path) -> Upstream {
    let cmd = [
        "python3".to_owned(),
        script("hostile_stdio.py").display().to_string(),
        mode.into(),
        marker.display().to_string(),
    ];
    // Named 2025-11-25: its modes count processes from the first, which is then the probe's session.
    Upstream::stdio(name, &cmd)
        .key("spare_processes", 0)
        .key("era", "2025-11-25")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_reading_its_stdin_fails_the_call_within_the_response_timeout_and_shutdown_still_ends_it(
) {
    let marker = peers::scratch().join("deaf-marker");
    let gw = gateway()
        .timeout("response_ms", 1500)
        .upstream_spec(hostile("deaf", "deaf", &marker))
        .all_legacy()
        .start()
        .await;
    let small = Call::new("deaf__take", json!({"x": 1}))
        .caps(json!({}))
        .send(&http(), &gw.url(), json!({}))
        .await;
    assert!(small.text().starts_with("took "), "{:?}", small);
    // 512 KiB: the pipe (64 KiB) fills once the server stops reading.
    let big = Call::new("deaf__take", json!({"x": "y".repeat(512 << 10)})).caps(json!({}));
    let reply = big.send(&http(), &gw.url(), json!({})).await;
    let msg = reply.msg["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // Whichever of the call's wait and the write's bound ends first: within response_ms either way.
    let bounded =
        msg.contains("stopped reading its stdin") || msg.contains("did not answer within 1500 ms");
    assert!(
        reply.status >= 500 && msg.contains("upstream 'deaf'") && bounded,
        "{reply:?}"
    );
    // The write gave up and ended that process: only Sluice's own session runs.
    let spec = gw.gateway.catalog.upstreams[0]
        .stdio
        .clone()
        .expect("a stdio upstream");
    crate::support::eventually("the deaf process was ended", || spec.running() == 1).await;
    let marker_text = marker.display().to_string();
    gw.stop().await;
    assert_eq!(
        processes_with(&marker_text),
        Vec::<u32>::new(),
        "a deaf server is still ended at shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_during_a_sessions_handshake_leaves_no_process_behind() {
    let marker = peers::scratch().join("mute-marker");
    let marker_text = marker.display().to_string();
    let gw = gateway()
        .upstream_spec(hostile("mute", "mute", &marker))
        .all_legacy()
        .start()
        .await;
    let spec = gw.gateway.catalog.upstreams[0]
        .stdio
        .clone()
        .expect("a stdio upstream");
    assert_eq!(spec.running(), 1, "Sluice's own session");
    // A new session's process never answers initialize; the client gives up meanwhile.
    let quick = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(300))
        .build()
        .expect("client");
    let call = Call::new("mute__take", json!({})).caps(json!({}));
    assert!(
        call.request(&quick, &gw.url(), json!({}))
            .send()
            .await
            .is_err(),
        "the client timed out"
    );
    crate::support::eventually("the abandoned handshake's process was ended", || {
        spec.running() == 1
    })
    .await;
    assert_eq!(
        processes_with(&marker_text).len(),
        1,
        "only Sluice's own session runs"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_slow_to_boot_is_given_start_ms_not_the_response_timeout() {
    let marker = peers::scratch().join("slow-marker");
    // 3 s to answer initialize, against a 1.5 s response bound: start_ms covers the boot.
    let gw = gateway()
        .timeout("response_ms", 1500)
        .upstream_spec(hostile("slow", "slow", &marker).key("start_ms", 20_000))
        .all_legacy()
        .start()
        .await;
    let took = Call::new("slow__take", json!({"x": 1}))
        .caps(json!({}))
        .send(&http(), &gw.url(), json!({}))
        .await;
    assert!(took.text().starts_with("took "), "{took:?}");
    gw.stop().await;

    // With start_ms under its boot, the start fails, says which bound, and ends the process.
    let marker = peers::scratch().join("slow-marker-2");
    let gw = gateway()
        .upstream_spec(hostile("slow", "slow", &marker).key("start_ms", 300))
        .unchecked()
        .start()
        .await;
    let status = gw.gateway.catalog.upstreams[0].status();
    let why = status.error.clone().unwrap_or_default();
    assert!(
        !status.healthy
            && why.contains("did not answer initialize within 300 ms")
            && why.contains("start_ms"),
        "{status:?}"
    );
    let spec = gw.gateway.catalog.upstreams[0]
        .stdio
        .clone()
        .expect("a stdio upstream");
    crate::support::eventually("the process that did not boot in time was ended", || {
        spec.running() == 0
    })
    .await;
    gw.stop().await;
    assert_eq!(
        processes_with(&marker.display().to_string()),
        Vec::<u32>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_2_3_server_over_stdio_is_served_with_its_sampling_as_a_round() {
    let py = peer_env("SLUICE_PY2").display().to_string();
    let server = [
        py,
        script("py_upstream.py").display().to_string(),
        "--stdio".into(),
    ];
    // mcp==2.3.0 takes seconds to import on a loaded 2-core machine: its boot is bounded by
    // start_ms (30 s), not the harness's 5 s response bound.
    // Named 2025-11-25, it is served on that wire (left to the probe, it is served on its
    // 2026-07-28 one: stdio_modern.rs).
    let gw = gateway()
        .upstream_spec(Upstream::stdio("py2", &server).key("era", "2025-11-25"))
        .all_legacy()
        .start()
        .await;
    assert_eq!(
        Call::new("py2__add", json!({"a": 2, "b": 3}))
            .caps(json!({}))
            .send(&http(), &gw.url(), json!({}))
            .await
            .text(),
        "5"
    );
    // Its resolver tool asks mid-call on the stdio wire: a round for the modern client.
    let call =
        Call::new("py2__ask_llm", json!({"prompt": "stdio-2.3"})).caps(json!({"sampling": {}}));
    let r1 = call.send(&http(), &gw.url(), json!({})).await;
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
            &gw.url(),
            json!({"requestState": r1.state(), "inputResponses": {key: sample("FROM-MODEL", "m")}}),
        )
        .await;
    assert!(done.text().contains("llm said: FROM-MODEL"), "{:?}", done);
    gw.stop().await;
}
