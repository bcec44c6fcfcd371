//! Issue 29 item 8: an upstream's breaker counts every HTTP 5xx without a JSON-RPC body as a
//! failure (as Envoy's outlier detection counts consecutive 5xx), and a JSON-RPC error body
//! under a 5xx as the answer it is. A hostile mock: no real server answers bare 500s on demand.

use bytes::Bytes;
use serde_json::{json, Value};

use super::prelude::*;
use crate::support::gateway::Upstream;

/// Failures in a row that open the breaker here.
const FAILURES: usize = 3;

/// Sluice in front of one mock whose every `tools/call` gets `answer`, breaker at [`FAILURES`].
async fn behind(
    name: &str,
    answer: fn() -> Reply,
) -> (crate::support::modern::Mock, sluice::Running) {
    let up = Spec::raw(name)
        .tools(vec![tool("boom")])
        .fallback(move |s| (s.method == "tools/call").then(answer))
        .start()
        .await;
    let spec = Upstream::new("h", &up.url())
        .key("breaker_failures", FAILURES as i64)
        .key("breaker_open_ms", 60_000);
    let s = Gateway::e2e().upstream_spec(spec).healthy().start().await;
    (up, s)
}

fn call(id: usize) -> Req {
    Req::new("tools/call")
        .id(json!(id))
        .params(json!({"name": "boom", "arguments": {}}))
}

fn breakers(s: &sluice::Running) -> Vec<&'static str> {
    s.gateway.catalog.upstreams[0]
        .balancer
        .endpoints
        .states()
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

#[tokio::test]
async fn http_500_without_a_jsonrpc_body_opens_the_breaker_after_the_configured_failures() {
    let (up, s) = behind("bare500", || {
        Reply::Raw(
            500,
            "text/html",
            Bytes::from_static(b"<h1>Internal Server Error</h1>"),
        )
    })
    .await;
    for i in 0..FAILURES {
        let r = call(i).send(&s.url()).await;
        r.error(502, -32603, &json!(i));
    }
    assert_eq!(
        breakers(&s),
        ["open"],
        "{FAILURES} bare 500s in a row open it"
    );
    // Refused at once now, with when to retry; the upstream is not asked again.
    let r = call(99).send(&s.url()).await;
    let e: Value = r.error(503, -32603, &json!(99));
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("breaker is open")),
        "{e}"
    );
    assert!(
        r.header("retry-after")
            .is_some_and(|v| v.parse::<u64>().is_ok_and(|s| s >= 1)),
        "{:?}",
        r.headers
    );
    assert_eq!(
        up.calls("boom"),
        FAILURES,
        "no call reaches it while its breaker is open"
    );
}

#[tokio::test]
async fn http_500_with_a_jsonrpc_error_body_is_an_answer_and_keeps_the_breaker_closed() {
    let (up, s) = behind("rpc500", || {
        Reply::Error(500, -32000, "the database is down")
    })
    .await;
    for i in 0..FAILURES * 2 {
        let r = call(i).send(&s.url()).await;
        let v = r.json();
        assert_eq!(
            v["error"]["code"], -32000,
            "the upstream's own error, relayed: {}",
            r.text
        );
        assert_ne!(r.status, 503, "never refused by the breaker: {}", r.text);
    }
    assert_eq!(
        breakers(&s),
        ["closed"],
        "a JSON-RPC error is an answer, whatever its status"
    );
    assert_eq!(up.calls("boom"), FAILURES * 2);
}
