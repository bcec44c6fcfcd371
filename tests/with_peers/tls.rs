//! Upstreams over `https://`: the official Python SDK's server (`mcp==2.3.0`) served with a
//! certificate for 127.0.0.1 signed by a CA of the test's own, reached through the `sluice`
//! binary that trusts that CA (`SSL_CERT_FILE`), and refused by one that does not.

use serde_json::{json, Value};

use crate::support::call::{http, Call};
use crate::support::gateway::Gateway;
use crate::support::peers::own_py2_tls;
use crate::support::process::{scratch, Env, Sluice};

fn config(url: &str) -> String {
    Gateway::new()
        .timeouts(&[("connect_ms", 2000), ("response_ms", 5000)])
        .upstream("secure", url)
        .text()
}

async fn echo(url: &str, text: &str) -> (u16, Value) {
    let r = Call::new("echo", json!({"text": text}))
        .caps(json!({}))
        .request(&http(), url, json!({}))
        .send()
        .await
        .expect("POST to sluice");
    let status = r.status().as_u16();
    (status, r.json().await.expect("a JSON answer"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_https_upstream_is_served_when_its_ca_is_trusted_and_refused_saying_why_when_not() {
    let dir = scratch("tls-ca");
    let up = own_py2_tls("py2-tls", &dir).await;
    assert!(up.url.starts_with("https://127.0.0.1:"), "{}", up.url);
    let ca = dir.join("ca.pem");

    let trusted = Env::new().set("SSL_CERT_FILE", ca.to_str().expect("a UTF-8 path"));
    let sluice = Sluice::start_env(&config(&up.url), &trusted).await;
    sluice.ready().await;
    let (status, v) = echo(&sluice.url(), "over tls").await;
    assert_eq!(status, 200, "{v}\n{}", sluice.output());
    assert_eq!(v["result"]["content"][0]["text"], "over tls", "{v}");
    sluice.terminate().await;

    // Another CA only: the server's certificate chains to nothing trusted.
    let other = scratch("tls-other-ca");
    let _other_up = own_py2_tls("py2-tls-other", &other).await;
    let untrusted = Env::new().set(
        "SSL_CERT_FILE",
        other.join("ca.pem").to_str().expect("UTF-8"),
    );
    let sluice = Sluice::start_env(&config(&up.url), &untrusted).await;
    sluice.ready().await;
    let (status, v) = echo(&sluice.url(), "not sent").await;
    assert_eq!(status, 503, "{v}");
    let reason = v["error"]["data"]["down"][0]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("upstream 'secure' is unreachable") && reason.contains("certificate"),
        "{v}"
    );
}
