//! Issue 33 item 1 under `[cluster]`: each of three replicas' admin API shows the whole
//! cluster, its own view and the others' (published through Redis), each labelled with its
//! replica; each refuses a caller without an admin key; a reload asked through one replica's
//! API is seen by another's.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::harness::{Cluster, Redis, Setup, ALICE};
use crate::support::peers;

const OPS: &str = "cluster-admin-tests-key-0123456789";

fn admin_section() -> String {
    format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\nkeys = [{{ name = \"ops\", sha256 = \"{}\" }}]\n",
        sluice::auth::api_keys::hash_key(OPS)
    )
}

async fn get(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut r = reqwest::Client::new().get(url);
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let resp = r.send().await.expect("admin answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Polls `url` (every 100 ms, up to 20 s) until `done` holds of its answer.
async fn until(url: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = get(url, Some(OPS)).await;
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn replicas_in(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = std::iter::once(&v["replica"])
        .chain(
            v["cluster"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| &o["replica"]),
        )
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

fn all_probed(v: &Value) -> bool {
    std::iter::once(v)
        .chain(v["cluster"].as_array().into_iter().flatten())
        .all(|view| view["upstreams"][0]["probed"] == true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replicas_admin_api_shows_the_whole_cluster_labelled_and_refuses_a_stranger() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).with(&admin_section())).await;
    for i in 0..3 {
        let base = c.admin_url(i);
        for key in [None, Some(ALICE)] {
            let (status, body) = get(&format!("{base}/admin/v1/upstreams"), key).await;
            assert_eq!(
                (status, &body["error"]["code"]),
                (401, &Value::from("unauthenticated"))
            );
        }
        let v = until(
            &format!("{base}/admin/v1/upstreams"),
            "three replicas, probed",
            |v| replicas_in(v) == ["r1", "r2", "r3"] && all_probed(v),
        )
        .await;
        assert_eq!(v["replica"], format!("r{}", i + 1));
        for view in std::iter::once(&v).chain(v["cluster"].as_array().expect("others")) {
            let py = &view["upstreams"][0];
            assert_eq!(
                (&py["name"], &py["healthy"]),
                (&Value::from("py"), &Value::from(true)),
                "{view}"
            );
            assert!(view["as_of_ms"].as_u64().is_some(), "{view}");
        }
        let p = until(
            &format!("{base}/admin/v1/principals"),
            "principals of three",
            |v| replicas_in(v) == ["r1", "r2", "r3"],
        )
        .await;
        assert!(p["principals"]
            .as_array()
            .expect("list")
            .iter()
            .any(|x| x["principal"] == "alice"));
    }
    // A reload through r2's API: r1's view of r2 shows the new generation.
    let r = reqwest::Client::new()
        .post(format!("{}/admin/v1/reload", c.admin_url(1)))
        .bearer_auth(OPS)
        .send()
        .await
        .expect("reload answers");
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.expect("json");
    assert_eq!(
        (&body["generation"], &body["operator"]),
        (&Value::from(2), &Value::from("ops"))
    );
    until(
        &format!("{}/admin/v1/upstreams", c.admin_url(0)),
        "r2 at generation 2",
        |v| {
            v["cluster"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o["replica"] == "r2" && o["generation"] == 2)
        },
    )
    .await;
}
