//! The 2024-11-05 HTTP+SSE client transport on the raw wire (issue 29, point 6), in front of the
//! Rust mock upstream: `GET /sse` opens a session whose stream's first event names the endpoint
//! to POST to; every POST is answered 202 and its answer (and, mid-call, Sluice's requests to
//! the client) comes on the stream as `event: message`, with no ids or priming events. Refused:
//! no credential (401), another principal's, unknown or ended session (404), other methods
//! (405), a foreign Origin (403, on the GET and on the POSTs); the stream and each call in
//! progress take the principal's stream places; a session ends with its stream, when evicted
//! for a newer one of its principal's (its stream closed), and at the latest after
//! `bridge.sse_session_max_ms` (its stream closed, its calls cancelled).

use serde_json::{json, Value};

use crate::support::gateway::{Gateway, ALICE_KEY, BOB_KEY};
use crate::support::legacy_client::{sample, Sse};
use crate::support::modern::{self, Noted};

async fn with_mock(setup: Gateway) -> (sluice::Running, Noted) {
    let m = modern::noted().await;
    let gw = setup.upstream("mock", &m.url()).start().await;
    (gw, m)
}

/// `http://127.0.0.1:PORT` of the gateway.
fn base(gw: &sluice::Running) -> String {
    gw.url().trim_end_matches("/mcp").to_owned()
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .expect("reqwest client")
}

/// One client session on the transport: its stream, and the URL its endpoint event named.
struct Session {
    stream: Sse,
    post_url: String,
    key: Option<&'static str>,
}

impl Session {
    /// `GET /sse` (with `key`); reads the endpoint event.
    async fn open(gw: &sluice::Running, key: Option<&'static str>) -> Session {
        let resp = get_sse(gw, key).await;
        assert_eq!(resp.status(), 200, "GET /sse");
        let mut stream = Sse::of(resp);
        assert!(
            stream.content_type.starts_with("text/event-stream"),
            "{}",
            stream.content_type
        );
        let first = stream.next().await.expect("the endpoint event");
        assert_eq!(
            first.name.as_deref(),
            Some("endpoint"),
            "the first event names the endpoint: {first:?}"
        );
        assert!(
            first.data.starts_with("/sse?session_id=s2."),
            "a path on the stream's origin with the session: {first:?}"
        );
        Session {
            stream,
            post_url: format!("{}{}", base(gw), first.data),
            key,
        }
    }

    /// POSTs `msg` to the session's endpoint as `key`; gives the status and the body.
    async fn post_as(&self, key: Option<&str>, msg: &Value) -> (u16, String) {
        post(&self.post_url, key, msg).await
    }

    /// POSTs `msg`, which must be answered 202 with no body.
    async fn send(&self, msg: Value) {
        let (status, body) = self.post_as(self.key, &msg).await;
        assert_eq!((status, body.as_str()), (202, ""), "POST {msg}");
    }

    /// The next message on the stream: `event: message`, no id, JSON.
    async fn message(&mut self) -> Value {
        let e = self
            .stream
            .next()
            .await
            .expect("the stream ended before the next message");
        assert_eq!(
            (e.name.as_deref(), e.id.as_deref()),
            (Some("message"), None),
            "{e:?}"
        );
        serde_json::from_str(&e.data).unwrap_or_else(|_| panic!("not JSON: {e:?}"))
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let answer = self.message().await;
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }
}

/// POSTs `msg` to `url` as `key`; gives the status and the body.
async fn post(url: &str, key: Option<&str>, msg: &Value) -> (u16, String) {
    let mut r = http()
        .post(url)
        .header("content-type", "application/json")
        .body(msg.to_string());
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let resp = r.send().await.expect("POST to a session's endpoint");
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

async fn get_sse(gw: &sluice::Running, key: Option<&str>) -> reqwest::Response {
    let mut r = http()
        .get(format!("{}/sse", base(gw)))
        .header("accept", "text/event-stream");
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    r.send().await.expect("GET /sse")
}

fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {"sampling": {}}, "clientInfo": {"name": "raw-sse", "version": "1"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_client_is_told_its_endpoint_and_gets_every_answer_and_sluices_requests_on_its_stream(
) {
    let (gw, m) = with_mock(Gateway::bridge_b().two_keys().budget("max_rounds", 2)).await;
    let mut c = Session::open(&gw, Some(ALICE_KEY)).await;

    // The 2024-11-05 handshake, answered with that version, on the stream.
    c.send(initialize("2024-11-05")).await;
    let init = c.message().await;
    assert_eq!(init["id"], 0, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "sluice", "{init}");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    assert_eq!(
        c.request(1, "ping", json!({})).await,
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
    let tools = c.request(2, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["mock__echo", "mock__forever", "mock__hang"],
        "{tools}"
    );
    let echo = c
        .request(
            3,
            "tools/call",
            json!({"name": "mock__echo", "arguments": {"text": "hi there"}}),
        )
        .await;
    assert_eq!(echo["result"]["content"][0]["text"], "hi there", "{echo}");
    assert!(
        echo["result"].get("resultType").is_none(),
        "no modern stamping for a legacy client: {echo}"
    );

    // A call whose upstream asks mid-call: each round is a real sampling request on the stream,
    // the POSTed answer gets 202, and the round cap ends it with -31010 for the call's id.
    c.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "mock__forever", "arguments": {"topic": "tea"}}}))
        .await;
    let mut asked = 0;
    let capped = loop {
        let msg = c.message().await;
        if msg["method"] != "sampling/createMessage" {
            break msg;
        }
        asked += 1;
        assert!(asked <= 2, "more asks than max_rounds: {msg}");
        assert_eq!(
            msg["params"]["messages"][0]["content"]["text"], "one more idea about tea",
            "{msg}"
        );
        c.send(
            json!({"jsonrpc": "2.0", "id": msg["id"], "result": sample(&format!("idea {asked}"))}),
        )
        .await;
    };
    assert_eq!(
        (capped["id"].clone(), capped["error"]["code"].clone()),
        (json!(4), json!(-31010)),
        "{capped}"
    );
    assert!(asked >= 1, "the upstream's ask reached the client");
    assert!(
        m.count("forever answered 1") >= 1,
        "the client's answer reached the upstream: {:?}",
        m.events()
    );

    // A second initialize on the same session is refused, on the stream.
    c.send(json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": initialize("2025-11-25")["params"]})).await;
    let again = c.message().await;
    assert_eq!(
        (again["id"].clone(), again["error"]["code"].clone()),
        (json!(5), json!(-32600)),
        "{again}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_without_a_credential_or_for_another_principals_or_an_unknown_session_are_refused() {
    let (gw, _m) = with_mock(Gateway::bridge_b().two_keys()).await;
    assert_eq!(
        get_sse(&gw, None).await.status(),
        401,
        "a GET without a credential"
    );
    let mut alice = Session::open(&gw, Some(ALICE_KEY)).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(
        alice.post_as(None, &ping).await.0,
        401,
        "a POST without a credential"
    );
    let (status, body) = alice.post_as(Some(BOB_KEY), &ping).await;
    assert_eq!(status, 404, "bob POSTing to alice's session: {body}");
    let unknown = format!("{}/sse?session_id=s2.{}", base(&gw), "A".repeat(44));
    assert_eq!(
        post(&unknown, Some(ALICE_KEY), &ping).await.0,
        404,
        "a session never opened"
    );
    assert_eq!(
        post(&format!("{}/sse", base(&gw)), Some(ALICE_KEY), &ping)
            .await
            .0,
        404,
        "no session_id"
    );
    let garbage = http()
        .post(&alice.post_url)
        .bearer_auth(ALICE_KEY)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(
        garbage.status(),
        400,
        "a body that is not JSON is the POST's own answer"
    );
    let resp = http()
        .delete(format!("{}/sse", base(&gw)))
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405, "DELETE on the SSE path");

    // The session is this transport's only: a Streamable HTTP request naming it finds nothing.
    let sid = alice
        .post_url
        .split("session_id=")
        .nth(1)
        .unwrap()
        .to_owned();
    let legacy = crate::support::legacy_client::Legacy::new(&gw.url())
        .token(ALICE_KEY)
        .with_session(&sid);
    assert_eq!(
        legacy.call(2, "ping", json!({})).await.0,
        404,
        "the SSE session on /mcp"
    );

    // Bob's refused POST did not touch alice's session: hers still answers.
    alice.send(initialize("2025-03-26")).await;
    assert_eq!(
        alice.message().await["result"]["protocolVersion"],
        "2025-03-26"
    );
    assert_eq!(
        alice.request(3, "ping", json!({})).await["result"],
        json!({})
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_and_each_call_take_stream_places_and_closing_the_stream_ends_the_session_and_its_calls(
) {
    let (gw, m) = with_mock(
        Gateway::bridge_b()
            .two_keys()
            .limit("max_streams_per_principal", 3),
    )
    .await;
    let mut a = Session::open(&gw, Some(ALICE_KEY)).await;
    a.send(initialize("2024-11-05")).await;
    a.message().await;
    // Two calls in progress: with the stream, alice holds her three places.
    for (id, tag) in [(1, "s1"), (2, "s2")] {
        a.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "mock__hang", "arguments": {"tag": tag}}}))
            .await;
        m.wait_event(&format!("start {tag}")).await;
    }
    let refused = get_sse(&gw, Some(ALICE_KEY)).await;
    assert_eq!(refused.status(), 429, "a fourth stream of alice's");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -31018, "{body}");
    // A third call is refused on the stream, with its id.
    let third = a
        .request(
            3,
            "tools/call",
            json!({"name": "mock__hang", "arguments": {"tag": "s3"}}),
        )
        .await;
    assert_eq!(third["error"]["code"], -31018, "{third}");
    assert_eq!(
        m.count("start s3"),
        0,
        "a refused call never reaches the upstream"
    );
    // Bob's share is his own.
    let _bob = Session::open(&gw, Some(BOB_KEY)).await;

    // The client goes away: its calls are cancelled upstream, its session ends, its places return.
    let post_url = a.post_url.clone();
    drop(a);
    m.wait_event("closed s1").await;
    m.wait_event("closed s2").await;
    crate::support::eventually_async("the closed stream's session ends", || {
        let url = post_url.clone();
        async move {
            post(
                &url,
                Some(ALICE_KEY),
                &json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
            )
            .await
            .0 == 404
        }
    })
    .await;
    crate::support::eventually_async("alice's places come back", || async {
        get_sse(&gw, Some(ALICE_KEY)).await.status() == 200
    })
    .await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_on_the_stream_and_on_its_posts_as_on_the_mcp_endpoint() {
    let allowed = crate::support::gateway::strings(&["https://app.example.com"]);
    let (gw, _m) = with_mock(
        Gateway::bridge_b()
            .two_keys()
            .top("allowed_origins", allowed),
    )
    .await;
    let stream_url = format!("{}/sse", base(&gw));
    for origin in [
        "http://evil.example.com",
        "null",
        "https://app.example.com:444",
    ] {
        let r = http()
            .get(&stream_url)
            .header("origin", origin)
            .bearer_auth(ALICE_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "GET /sse with Origin {origin}");
    }
    let ok = http()
        .get(&stream_url)
        .header("origin", "https://app.example.com")
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "an allowed Origin opens the stream");
    drop(ok);

    let mut alice = Session::open(&gw, Some(ALICE_KEY)).await;
    let init = initialize("2024-11-05");
    let foreign = http()
        .post(&alice.post_url)
        .header("origin", "http://evil.example.com")
        .bearer_auth(ALICE_KEY)
        .json(&init);
    assert_eq!(
        foreign.send().await.unwrap().status(),
        403,
        "a POST to the session from a foreign Origin"
    );
    // Refused at the edge: the session never saw that initialize, so alice's own is the first.
    alice.send(init).await;
    assert_eq!(
        alice.message().await["result"]["protocolVersion"],
        "2024-11-05"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_at_its_maximum_lifetime_with_its_stream_and_its_calls() {
    // Long enough to open, initialize and call on a busy machine; the call's upstream would
    // answer (a timeout) only long after.
    let setup = Gateway::bridge_b()
        .two_keys()
        .bridge_key("sse_session_max_ms", 3000)
        .timeout("response_ms", 60_000);
    let (gw, m) = with_mock(setup).await;
    let mut a = Session::open(&gw, Some(ALICE_KEY)).await;
    a.send(initialize("2024-11-05")).await;
    a.message().await;
    a.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "mock__hang", "arguments": {"tag": "life"}}}))
        .await;
    m.wait_event("start life").await;
    // The stream is kept open and read: it ends all the same, and the call with it.
    while let Some(e) = a.stream.next().await {
        assert_ne!(
            e.name.as_deref(),
            Some("message"),
            "nothing answers a hanging call: {e:?}"
        );
    }
    m.wait_event("closed life").await;
    let (status, body) = a
        .post_as(
            Some(ALICE_KEY),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        )
        .await;
    assert_eq!(status, 404, "the session ended with its stream: {body}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_session_past_its_share_ends_its_oldest_and_closes_that_stream() {
    let (gw, _m) = with_mock(
        Gateway::bridge_b()
            .two_keys()
            .bridge_key("max_client_sessions_per_principal", 1),
    )
    .await;
    let mut first = Session::open(&gw, Some(ALICE_KEY)).await;
    let mut second = Session::open(&gw, Some(ALICE_KEY)).await;
    assert_eq!(
        first.stream.next().await.map(|e| e.data),
        None,
        "the evicted session's stream closes"
    );
    let (status, _) = first
        .post_as(Some(ALICE_KEY), &initialize("2024-11-05"))
        .await;
    assert_eq!(status, 404, "the evicted session is gone");
    second.send(initialize("2024-11-05")).await;
    assert_eq!(
        second.message().await["result"]["protocolVersion"],
        "2024-11-05",
        "the new one is served"
    );
    gw.stop().await;
}
