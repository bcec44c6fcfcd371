//! Issue 15 item 2 on the binary: the config file edited and `SIGHUP` sent under load. An
//! upstream added and one removed (with a call in flight on it) lose no request; a broken file changes nothing and says why
//! (a log line and `sluice_config_reloads_total{result="failed"}`).

use serde_json::json;

use crate::support::gateway::Gateway;
use crate::support::load::{call, tool_names, with_slow_tool, Load};
use crate::support::modern::{tool, Spec};
use crate::support::process::Sluice;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_edited_file_under_load_and_a_broken_file_changes_nothing() {
    let a = Spec::new("a").start().await;
    let (b, gate) = with_slow_tool("b").await;
    let c = Spec::new("c").tools(vec![tool("fresh")]).start().await;
    let config = |second: (&str, &str)| {
        Gateway::hostile()
            .upstream("a", &a.url())
            .upstream(second.0, second.1)
            .text()
    };
    let s = Sluice::start(&config(("b", &b.url()))).await;
    let url = s.url();
    assert_eq!(tool_names(&url).await, ["a__echo", "b__echo", "b__slow"]);
    let load = Load::start(&url, "a__echo", None, 4);
    load.past(20).await;
    // A call in flight on the upstream about to be removed.
    let slow = tokio::spawn({
        let url = url.clone();
        async move { call("b__slow").send(&url).await }
    });
    b.until("the slow call arrived", |m| m.calls("slow") == 1)
        .await;

    // b out, c in.
    std::fs::write(s.config_path(), config(("c", &c.url()))).expect("edit the config");
    s.signal("HUP").await;
    s.logged("config reloaded", 1).await;
    assert_eq!(tool_names(&url).await, ["a__echo", "c__fresh"]);
    assert_eq!(
        call("c__fresh").send(&url).await.result(&json!(1))["content"][0]["text"],
        "c ran fresh"
    );
    load.past(20).await;
    gate.send_replace(true);
    assert_eq!(
        slow.await.expect("the slow call").result(&json!(1))["content"][0]["text"],
        "slow done",
        "it finished on b"
    );

    // A file that does not parse: the previous config keeps serving.
    std::fs::write(s.config_path(), "listen = [\n").expect("break the config");
    s.signal("HUP").await;
    s.logged("config reload failed", 1).await;
    assert_eq!(tool_names(&url).await, ["a__echo", "c__fresh"]);
    load.past(20).await;
    load.finish().await;
    let metrics = reqwest::get(s.at("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    for line in [
        "sluice_config_reloads_total{result=\"applied\"} 1",
        "sluice_config_reloads_total{result=\"failed\"} 1",
        "sluice_config_generation 2",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // The failure says why, naming the file.
    let out = s.output();
    let failed = out
        .lines()
        .find(|l| l.contains("config reload failed"))
        .expect("the failure line");
    assert!(
        failed.contains("sluice.toml"),
        "the reason names the file: {failed}"
    );
}
