//! Issue 29 items 1 and 2, against the `sluice` binary (its own log read) and real servers:
//! the conformance fixture (`mcp==2.3.0`) over HTTP, killed and started again on its port, and
//! `tests/peers/py_upstream.py` over stdio, its process killed. With every upstream down a call
//! gets 503 `-31030` with `Retry-After` naming it (not 404 `-32601`) and `/readyz` is 503; the
//! server back, the next call is served; each change is one log line and a count.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::stdio::processes_with;
use crate::support::call::{http, Call};
use crate::support::gateway::{Gateway, Upstream};
use crate::support::peers::{own_modern_fixture, own_modern_fixture_at, peer_env, script};
use crate::support::process::Sluice;

/// The default refresh (30 s): before issue 29, a server back was served only after it.
fn gateway() -> Gateway {
    Gateway::new().timeouts(&[
        ("connect_ms", 500),
        ("response_ms", 5000),
        ("refresh_ms", 30_000),
        ("shutdown_ms", 1000),
    ])
}

async fn call(url: &str, name: &str) -> reqwest::Response {
    let c = Call::new(name, json!({})).caps(json!({}));
    c.request(&http(), url, json!({}))
        .send()
        .await
        .expect("POST to sluice")
}

async fn list(url: &str) -> reqwest::Response {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .body(body.to_string())
        .send()
        .await
        .expect("POST tools/list")
}

async fn get(sluice: &Sluice, path: &str) -> (u16, String) {
    let r = http().get(sluice.at(path)).send().await.expect("GET");
    (r.status().as_u16(), r.text().await.expect("body"))
}

/// Asserts a 503 `-31030` with `Retry-After` naming `upstream` down; gives the message.
async fn unavailable(r: reqwest::Response, upstream: &str) -> String {
    assert_eq!(r.status().as_u16(), 503, "{r:?}");
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(
        retry.is_some_and(|s| s >= 1),
        "Retry-After: {:?}",
        r.headers()
    );
    let v: Value = r.json().await.expect("a JSON-RPC error");
    assert_eq!(v["error"]["code"], -31030, "{v}");
    assert_eq!(v["error"]["data"]["down"][0]["upstream"], upstream, "{v}");
    assert!(
        v["error"]["data"]["down"][0]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{v}"
    );
    let msg = v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains(&format!("upstream '{upstream}' is down")),
        "{msg}"
    );
    msg
}

fn metric(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))?;
    line.rsplit(' ').next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_only_upstream_killed_calls_get_503_naming_it_and_once_back_the_next_call_is_served(
) {
    let fx = own_modern_fixture("health-fx").await;
    let port: u16 = fx
        .url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let sluice = Sluice::start(&gateway().upstream("fx", &fx.url).text()).await;
    let url = sluice.url();
    assert_eq!(call(&url, "test_simple_text").await.status(), 200);
    assert_eq!(get(&sluice, "/readyz").await.0, 200);

    fx.kill();
    // The call under way when it died may get 502; from then on, 503 naming it.
    crate::support::eventually_async("calls get 503", || async {
        call(&url, "test_simple_text").await.status() == 503
    })
    .await;
    let msg = unavailable(call(&url, "test_simple_text").await, "fx").await;
    assert!(msg.contains("retry in 1 s"), "{msg}");
    // The list too: a family a configured upstream serves is not a wrong URL (it was 404 -32601).
    unavailable(list(&url).await, "fx").await;
    let (status, body) = get(&sluice, "/readyz").await;
    assert_eq!(status, 503, "no healthy upstream: not ready: {body}");
    let ready: Value = serde_json::from_str(&body).expect("readyz JSON");
    assert_eq!(
        (ready["ready"].clone(), ready["healthy"].clone()),
        (json!(false), json!(0)),
        "{body}"
    );
    sluice.logged("upstream is down", 1).await;
    let down = sluice
        .output()
        .lines()
        .filter(|l| l.contains("upstream is down"))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    assert!(
        down.len() == 1
            && down[0].contains("upstream=fx")
            && down[0].contains("Connection refused"),
        "{down:?}"
    );

    // Back on its port (own_modern_fixture_at returns once it listens).
    let _fx = own_modern_fixture_at("health-fx-back", port).await;
    let back = Instant::now();
    let first = call(&url, "test_simple_text").await;
    if first.status() != 200 {
        // Else the second, made once /readyz says it is back, within 2 s of it listening.
        crate::support::eventually_async("ready again", || async {
            get(&sluice, "/readyz").await.0 == 200
        })
        .await;
        assert_eq!(call(&url, "test_simple_text").await.status(), 200);
        assert!(
            back.elapsed() < Duration::from_secs(2),
            "served {:?} after it listened again",
            back.elapsed()
        );
    }
    assert_eq!(get(&sluice, "/readyz").await.0, 200);
    sluice.logged("upstream is up again", 1).await;
    let out = sluice.output();
    assert_eq!(
        out.matches("upstream is down").count(),
        1,
        "one line per change, not per failed probe:\n{out}"
    );
    let warned = out
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("upstream=fx"))
        .count();
    assert!(
        warned <= 2,
        "the down line (and the breaker's), not one per failed probe:\n{out}"
    );
    let (_, m) = get(&sluice, "/metrics").await;
    assert_eq!(
        metric(
            &m,
            "sluice_upstream_health_changes_total",
            &["upstream=\"fx\"", "to=\"down\""]
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "sluice_upstream_healthy", &["upstream=\"fx\""]),
        Some(1.0),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_whose_process_dies_is_logged_down_with_its_exit_status_and_up_once_restarted(
) {
    let tag = format!("--tag={}", crate::support::unique("health-stdio"));
    let py = peer_env("SLUICE_PY2").display().to_string();
    let up = Upstream::stdio(
        "py2",
        &[
            py,
            script("py_upstream.py").display().to_string(),
            "--stdio".into(),
            tag.clone(),
        ],
    )
    .key("spare_processes", 0);
    let sluice = Sluice::start(&gateway().upstream_spec(up).text()).await;
    let url = sluice.url();
    let echo = || Call::new("echo", json!({"text": "hi"})).caps(json!({}));
    assert_eq!(echo().send(&http(), &url, json!({})).await.text(), "hi");
    crate::support::eventually("one process left", || processes_with(&tag).len() == 1).await;
    let pid = processes_with(&tag)[0];
    assert!(std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success()));

    sluice.logged("upstream is down", 1).await;
    let out = sluice.output();
    let line = out
        .lines()
        .find(|l| l.contains("upstream is down"))
        .unwrap_or_default();
    assert!(
        line.contains("upstream=py2") && line.contains("its process exited (signal 9)"),
        "the exit status, on one line:\n{out}"
    );
    // Its re-prober starts a new process; once it answers, one line says so.
    sluice.logged("stdio upstream restarted", 1).await;
    assert_eq!(echo().send(&http(), &url, json!({})).await.text(), "hi");
    assert!(
        processes_with(&tag).iter().all(|p| *p != pid),
        "a new process"
    );
    assert_eq!(
        sluice.output().matches("upstream is down").count(),
        1,
        "{}",
        sluice.output()
    );
}
