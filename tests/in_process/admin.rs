//! Issue 33 item 1: the admin listener (`[admin]`). Every path needs an operator: an admin key
//! (never an MCP principal's), or a console sign-in whose every change carries its CSRF token;
//! another site's `Origin` is refused, and so is a foreign `Host` on an open loopback listener
//! (DNS rebinding). The views show upstreams with their health history, the recent audit
//! records (content-free) and the config generation; the event stream tells a reload.

use std::time::Duration;

use serde_json::{json, Value};
use toml::Value as T;

use super::prelude::*;
use crate::support::gateway::ALICE_KEY;

const OPS_KEY: &str = "admin-tests-operator-key-0123456789";

fn admin_key(name: &str, key: &str) -> T {
    let mut t = toml::Table::new();
    t.insert("name".into(), name.into());
    t.insert(
        "sha256".into(),
        sluice::auth::api_keys::hash_key(key).into(),
    );
    T::Table(t)
}

fn with_admin(g: Gateway) -> Gateway {
    g.set("admin", "listen", "127.0.0.1:0").set(
        "admin",
        "keys",
        T::Array(vec![admin_key("ops", OPS_KEY)]),
    )
}

fn base(s: &sluice::Running) -> String {
    format!("http://{}", s.admin.expect("the admin listener is up"))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// Every path with the methods it takes: what must be refused without an operator.
const PATHS: &[(&str, &str)] = &[
    ("GET", "/admin/v1/"),
    ("GET", "/admin/v1/upstreams"),
    ("GET", "/admin/v1/principals"),
    ("GET", "/admin/v1/approvals"),
    ("POST", "/admin/v1/approvals/some-id/approve"),
    ("POST", "/admin/v1/approvals/some-id/deny"),
    ("GET", "/admin/v1/pins"),
    ("POST", "/admin/v1/pins/demo/echo/accept"),
    ("GET", "/admin/v1/audit"),
    ("GET", "/admin/v1/config"),
    ("POST", "/admin/v1/reload"),
    ("GET", "/admin/v1/events"),
    ("DELETE", "/admin/v1/session"),
];

async fn send(
    c: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut r = c.request(method.parse().expect("method"), url);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.expect("admin answers");
    let status = resp.status().as_u16();
    if resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "text/event-stream")
    {
        return (status, Value::Null);
    }
    let body = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

type Demo = sluice_testkit::demo::upstream::DemoUpstream;

async fn demo_with(g: impl FnOnce(Gateway) -> Gateway) -> (Demo, sluice::Running) {
    let demo = sluice_testkit::demo::upstream::start("demo", ([127, 0, 0, 1], 0).into())
        .await
        .expect("demo upstream starts");
    let s = g(Gateway::e2e().upstream("demo", &demo.url()))
        .start()
        .await;
    (demo, s)
}

#[tokio::test]
async fn every_admin_path_refuses_no_credential_an_mcp_principals_key_and_a_wrong_key() {
    let (_d, s) = demo_with(|g| with_admin(g.two_keys())).await;
    let b = base(&s);
    // Each path from a loopback address of its own: a source's wrong credentials are counted
    // (ten a minute, then `slow_down`).
    for (i, (m, p)) in PATHS.iter().enumerate() {
        let from: std::net::IpAddr = [127, 0, 1, i as u8 + 1].into();
        let c = reqwest::Client::builder()
            .local_address(from)
            .build()
            .expect("client");
        let url = format!("{b}{p}");
        for auth in [None, Some(ALICE_KEY), Some("not-a-key")] {
            let bearer = auth.map(|k| format!("Bearer {k}"));
            let h: Vec<(&str, &str)> = bearer
                .iter()
                .map(|v| ("authorization", v.as_str()))
                .collect();
            let (status, body) = send(&c, m, &url, &h).await;
            assert_eq!(status, 401, "{m} {p} with {auth:?}: {body}");
            assert_eq!(body["error"]["code"], "unauthenticated", "{m} {p}");
        }
        let bearer = format!("Bearer {OPS_KEY}");
        let (status, body) = send(&c, m, &url, &[("authorization", &bearer)]).await;
        assert!(
            ![401, 403].contains(&status),
            "{m} {p} with the admin key: {status} {body}"
        );
    }
}

#[tokio::test]
async fn a_console_sign_in_changes_nothing_without_its_csrf_token() {
    let (_d, s) = demo_with(with_admin).await;
    let (c, b) = (http(), base(&s));
    let (status, body) = send(&c, "POST", &format!("{b}/admin/v1/session"), &[]).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("bad_request"))
    );
    let wrong = c
        .post(format!("{b}/admin/v1/session"))
        .json(&json!({"key": ALICE_KEY}))
        .send()
        .await
        .expect("answer");
    assert_eq!(wrong.status(), 401);
    let signed = c
        .post(format!("{b}/admin/v1/session"))
        .json(&json!({"key": OPS_KEY}))
        .send()
        .await
        .expect("answer");
    assert_eq!(signed.status(), 200);
    let set = signed.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().expect("cookie").to_owned();
    let who: Value = signed.json().await.expect("json");
    assert_eq!(
        (&who["operator"], &who["via"]),
        (&json!("ops"), &json!("session"))
    );
    let csrf = who["csrf"].as_str().expect("a CSRF token").to_owned();
    // Reading needs the cookie only.
    let (status, _) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("cookie", &cookie)],
    )
    .await;
    assert_eq!(status, 200);
    for (m, p) in PATHS.iter().filter(|(m, _)| *m != "GET") {
        let url = format!("{b}{p}");
        for h in [
            vec![("cookie", cookie.as_str())],
            vec![("cookie", cookie.as_str()), ("x-csrf-token", "0000")],
        ] {
            let (status, body) = send(&c, m, &url, &h).await;
            assert_eq!(
                (status, &body["error"]["code"]),
                (403, &json!("csrf")),
                "{m} {p}"
            );
        }
        let h = [("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())];
        let (status, body) = send(&c, m, &url, &h).await;
        assert!(
            ![401, 403].contains(&status),
            "{m} {p} with the token: {status} {body}"
        );
        if *p == "/admin/v1/session" {
            assert_eq!(status, 200);
        }
    }
    // Signed out above: the cookie opens nothing now.
    let (status, _) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("cookie", &cookie)],
    )
    .await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn another_sites_origin_is_refused_even_with_the_admin_key() {
    let (_d, s) = demo_with(with_admin).await;
    let (c, b) = (http(), base(&s));
    let bearer = format!("Bearer {OPS_KEY}");
    let h = [
        ("authorization", bearer.as_str()),
        ("origin", "http://evil.example"),
    ];
    let (status, body) = send(&c, "POST", &format!("{b}/admin/v1/reload"), &h).await;
    assert_eq!((status, &body["error"]["code"]), (403, &json!("origin")));
}

#[tokio::test]
async fn an_open_loopback_listener_refuses_a_foreign_host_and_a_change_without_a_sign_in() {
    let (_d, s) = demo_with(|g| g.set("admin", "listen", "127.0.0.1:0")).await;
    let (c, b) = (http(), base(&s));
    let (status, body) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("host", "rebound.example")],
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (403, &json!("host")));
    let (status, body) = send(&c, "GET", &format!("{b}/admin/v1/config"), &[]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(&c, "POST", &format!("{b}/admin/v1/reload"), &[]).await;
    assert_eq!((status, &body["error"]["code"]), (403, &json!("csrf")));
    let signed = c
        .get(format!("{b}/admin/v1/session"))
        .send()
        .await
        .expect("answer");
    let cookie = signed.headers()["set-cookie"].to_str().expect("ascii");
    let cookie = cookie.split(';').next().expect("cookie").to_owned();
    let who: Value = signed.json().await.expect("json");
    assert_eq!(
        (&who["operator"], &who["via"]),
        (&json!("local"), &json!("loopback"))
    );
    let csrf = who["csrf"].as_str().expect("csrf").to_owned();
    let h = [("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())];
    let (status, body) = send(&c, "POST", &format!("{b}/admin/v1/reload"), &h).await;
    // Started in-process from a config value, not a file: nothing to read again, said so.
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("reload_refused")),
        "{body}"
    );
}

#[tokio::test]
async fn the_views_show_upstreams_with_history_the_audit_without_content_and_the_generation() {
    let quota: T =
        toml::from_str::<toml::Table>("name = \"echoes\"\ncalls_per_window = 5\ntool = [\"echo\"]")
            .expect("a quota")
            .into();
    let (_d, s) = demo_with(|g| {
        with_admin(g.upstream("gone", &dead_url()).unchecked()).top("quota", T::Array(vec![quota]))
    })
    .await;
    let (c, b) = (http(), base(&s));
    let canary = "admin-view-canary-7f3e";
    let r = Req::new("tools/call")
        .params(json!({"name": "demo__echo", "arguments": {"text": canary}}))
        .send(&s.url())
        .await;
    assert_eq!(r.status, 200);
    let bearer = format!("Bearer {OPS_KEY}");
    let h = [("authorization", bearer.as_str())];
    let (_, ups) = send(&c, "GET", &format!("{b}/admin/v1/upstreams"), &h).await;
    let by = |n: &str| {
        ups["upstreams"]
            .as_array()
            .expect("list")
            .iter()
            .find(|u| u["name"] == n)
            .cloned()
            .expect("listed")
    };
    let (demo, gone) = (by("demo"), by("gone"));
    assert_eq!(
        (demo["healthy"].clone(), gone["healthy"].clone()),
        (json!(true), json!(false))
    );
    assert!(
        demo["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "demo__echo"),
        "{demo}"
    );
    assert_eq!(gone["history"][0]["healthy"], false, "{gone}");
    assert!(gone["history"][0]["reason"].is_string(), "{gone}");
    assert_eq!(demo["history"][0]["healthy"], true, "{demo}");
    let mut audit = Value::Null;
    for _ in 0..200 {
        (_, audit) = send(&c, "GET", &format!("{b}/admin/v1/audit?limit=10"), &h).await;
        if audit["records"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x["method"] == "tools/call"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = audit.to_string();
    assert!(text.contains("tools/call"), "{text}");
    assert!(
        !text.contains(canary),
        "an argument value in the audit view: {text}"
    );
    let (_, p) = send(&c, "GET", &format!("{b}/admin/v1/principals"), &h).await;
    let local = &p["principals"][0];
    assert_eq!(local["principal"], "local", "{p}");
    assert_eq!(
        local["quotas"][0],
        json!({"quota": "echoes", "used": 1, "limit": 5, "left": 4,
        "window_start_ms": local["quotas"][0]["window_start_ms"]}),
        "{p}"
    );
    let (_, cfg) = send(&c, "GET", &format!("{b}/admin/v1/config"), &h).await;
    assert_eq!(cfg["generation"], 1);
}

#[tokio::test]
async fn the_event_stream_tells_a_reload() {
    let (_d, s) = demo_with(with_admin).await;
    let b = base(&s);
    let resp = http()
        .get(format!("{b}/admin/v1/events"))
        .bearer_auth(OPS_KEY)
        .send()
        .await
        .expect("stream opens");
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut resp = resp;
    // The first chunk is the greeting: the stream is subscribed once it is read.
    let first = resp.chunk().await.expect("read").expect("greeting");
    assert!(String::from_utf8_lossy(&first).starts_with(": events of replica"));
    let cfg = s.current().cfg.clone();
    s.reload(cfg).await.expect("reloads");
    let mut seen = String::new();
    let got = tokio::time::timeout(WAIT, async {
        while let Ok(Some(c)) = resp.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&c));
            if seen.contains("event: reload") {
                return;
            }
        }
    })
    .await;
    assert!(got.is_ok(), "no reload event: {seen}");
    assert!(seen.contains("\"generation\":2"), "{seen}");
}

#[tokio::test]
async fn every_answer_is_uncached_unframed_and_a_large_body_is_refused_unread() {
    let (_d, s) = demo_with(with_admin).await;
    let (c, b) = (http(), base(&s));
    for (key, path) in [
        (None, "/admin/v1/config"),
        (Some(OPS_KEY), "/admin/v1/config"),
    ] {
        let mut r = c.get(format!("{b}{path}"));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let resp = r.send().await.expect("answer");
        let h = resp.headers();
        assert_eq!(h["cache-control"], "no-store");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert!(h["content-security-policy"]
            .to_str()
            .expect("ascii")
            .contains("default-src 'none'"));
    }
    let resp = c
        .post(format!("{b}/admin/v1/session"))
        .body(vec![b' '; 65 * 1024])
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["code"], "too_large");
}

#[tokio::test]
async fn one_source_holds_at_most_32_admin_connections() {
    use tokio::io::AsyncReadExt;
    // Idle connections are not closed for a minute: only the bound can close the 33rd sooner.
    let (_d, s) = demo_with(|g| with_admin(g).timeout("header_read_ms", 60_000)).await;
    let addr = s.admin.expect("admin");
    let mut held = Vec::new();
    for _ in 0..sluice::admin::listen::MAX_PER_SOURCE {
        held.push(
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects"),
        );
    }
    let mut extra = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut buf)).await;
    assert!(
        matches!(n, Ok(Ok(0)) | Ok(Err(_))),
        "the 33rd connection is closed at once: {n:?}"
    );
    drop(held);
}

#[tokio::test]
async fn an_open_sign_in_ends_when_a_reload_adds_credentials() {
    let (demo, s) = demo_with(|g| g.set("admin", "listen", "127.0.0.1:0")).await;
    let (c, b) = (http(), base(&s));
    let signed = c
        .get(format!("{b}/admin/v1/session"))
        .send()
        .await
        .expect("answer");
    let cookie = signed.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(cookie.contains("Path=/admin/v1;"), "{cookie}");
    let cookie = cookie.split(';').next().expect("cookie").to_owned();
    let (status, _) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("cookie", &cookie)],
    )
    .await;
    assert_eq!(status, 200);
    let keyed = with_admin(Gateway::e2e().upstream("demo", &demo.url())).config();
    let mut keyed = keyed;
    keyed.listen = s.addr;
    s.reload(keyed).await.expect("reloads");
    let (status, body) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("cookie", &cookie)],
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("unauthenticated")),
        "{body}"
    );
}

#[tokio::test]
async fn an_open_listener_refuses_a_cross_site_sign_in_and_a_proxied_request() {
    let (_d, s) = demo_with(|g| g.set("admin", "listen", "127.0.0.1:0")).await;
    let (c, b) = (http(), base(&s));
    let (status, body) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/session"),
        &[("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (403, &json!("origin")));
    let (status, _) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/session"),
        &[("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("x-forwarded-for", "203.0.113.9")],
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (403, &json!("host")));
    // A path that only begins like the API's is no path of it.
    let (status, _) = send(&c, "GET", &format!("{b}/admin/v1config"), &[]).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn ten_wrong_credentials_in_a_minute_slow_a_source_down() {
    let (_d, s) = demo_with(with_admin).await;
    let (c, b) = (http(), base(&s));
    for i in 0..sluice::admin::MAX_FAILURES {
        let (status, _) = send(
            &c,
            "GET",
            &format!("{b}/admin/v1/config"),
            &[("authorization", "Bearer wrong")],
        )
        .await;
        assert_eq!(status, 401, "try {i}");
    }
    let bearer = format!("Bearer {OPS_KEY}");
    let (status, body) = send(
        &c,
        "GET",
        &format!("{b}/admin/v1/config"),
        &[("authorization", &bearer)],
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (429, &json!("slow_down")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_argument_value_or_result_reaches_any_admin_view_or_event_of_a_held_call() {
    const RULE: &str = "[[rule]]\nname = \"ops\"\nmatch = { method = [\"tools/call\"], tool = [\"echo\"] }\neffect = \"approve\"\napprover = \"operator\"\n";
    let canary = "admin-api-canary-5d1e0b";
    let (_d, s) = demo_with(|g| with_admin(g).policy(RULE)).await;
    let (c, b) = (http(), base(&s));
    let bearer = format!("Bearer {OPS_KEY}");
    let h = [("authorization", bearer.as_str())];
    let mut events = c
        .get(format!("{b}/admin/v1/events"))
        .bearer_auth(OPS_KEY)
        .send()
        .await
        .expect("stream");
    events.chunk().await.expect("read").expect("greeting");
    let url = s.url();
    let call = tokio::spawn(async move {
        Req::new("tools/call")
            .params(json!({"name": "echo", "arguments": {"text": canary}}))
            .send(&url)
            .await
    });
    let mut held = Value::Null;
    for _ in 0..500 {
        (_, held) = send(&c, "GET", &format!("{b}/admin/v1/approvals"), &h).await;
        if held["approvals"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if held["approvals"].as_array().is_none_or(|a| a.is_empty()) {
        let r = call.await.expect("the call ends");
        panic!("nothing held; the call answered {} {}", r.status, r.text);
    }
    let entry = &held["approvals"][0];
    assert_eq!(entry["argument_keys"], json!(["text"]), "{held}");
    let id = entry["id"].as_str().expect("an id").to_owned();
    let (status, decided) = send(
        &c,
        "POST",
        &format!("{b}/admin/v1/approvals/{id}/approve"),
        &h,
    )
    .await;
    assert_eq!(
        (status, &decided["operator"]),
        (200, &json!("ops")),
        "{decided}"
    );
    let r = call.await.expect("the call ends");
    assert!(r.text.contains(canary), "the approved call ran: {}", r.text);
    let mut seen = held.to_string();
    for path in [
        "upstreams",
        "principals",
        "approvals",
        "pins",
        "audit?limit=100",
        "config",
    ] {
        let (_, v) = send(&c, "GET", &format!("{b}/admin/v1/{path}"), &h).await;
        seen.push_str(&v.to_string());
    }
    let streamed = tokio::time::timeout(Duration::from_secs(2), async {
        let mut text = String::new();
        while let Ok(Some(chunk)) = events.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains("\"approved\"") {
                break;
            }
        }
        text
    })
    .await
    .unwrap_or_default();
    assert!(streamed.contains("event: approval"), "{streamed}");
    seen.push_str(&streamed);
    assert!(
        !seen.contains(canary),
        "a value reached the admin plane: {seen}"
    );
}
