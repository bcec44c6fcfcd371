//! The text peers choose, against the log: a replica name a client wrote into an answer id is
//! checked against `cluster.id`'s grammar before it is used, and no peer text (that id, a
//! principal a forward carries) forges a line in a replica's log.

use serde_json::json;

use super::harness::{keys, Cluster, Redis, Setup, ALICE};
use super::internal::{signed, who};
use crate::support::call;
use crate::support::peers;

/// What a forged line would start with (a time no real line of the run can carry).
const FORGED: &str = "1999-12-31T23:59:59.999999Z ERROR sluice: principal=admin granted root";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_name_a_client_wrote_into_an_answer_id_forges_no_log_line() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url)).await;
    let mut client = crate::support::legacy_client::Legacy::new(&c.url).token(ALICE);
    client.initialize(json!({"sampling": {}})).await;
    // Answers whose ids look like Sluice's but carry a line in the replica's place; each lands
    // on the next replica (round robin), three times round.
    let ids = [format!("sluice-r9\n{FORGED}-1"), format!("sluice-r9\r\n{FORGED}-2"), format!("sluice-\n{FORGED}\n-3")];
    for id in ids.iter().chain(&ids).chain(&ids) {
        let answer =
            json!({"jsonrpc": "2.0", "id": id, "result": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}});
        assert_eq!(client.post(&answer).await.status(), 202, "an answer nobody waits for is taken and dropped");
    }
    // A forward whose principal (as an identity provider may spell it) carries a line.
    let (http, post) = (call::http(), http::Method::POST);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": crate::support::client::meta()}}).to_string();
    let mcp = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
    let h = signed(&keys(), ("r9", "r1"), &post, &who(&format!("bob\n{FORGED}"), &[]), &mcp, list.as_bytes());
    http.post(c.internal_url(0)).headers(h).body(list).send().await.expect("POST");
    // Each replica then logs a refused credential: what came before is in its output.
    for i in 0..3 {
        let marker = http.post(c.replica(i).url()).bearer_auth("not-a-key").header("accept", "application/json, text/event-stream");
        let r = marker.body("{}").send().await.expect("POST");
        assert_eq!(r.status(), 401);
        c.replica(i).logged("request not authenticated", 1).await;
    }
    for i in 0..3 {
        let out = c.replica(i).output();
        let forged: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("1999-12-31T23:59:59")).collect();
        assert!(forged.is_empty(), "replica r{} wrote a forged line: {forged:#?}", i + 1);
    }
}
