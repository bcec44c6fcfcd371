//! The internal listener reads no body it cannot verify: a forward's head signs its body's
//! length and digest, so a head that does not verify is answered before a byte of its body is
//! sent, and the connection closed; a signed length over `limits.max_body_bytes` likewise; a body
//! that is not the signed one is refused; a replica of another version is refused with a line
//! that says so; and one source holds at most `cluster.max_connections_per_source` connections.

use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::harness::{keys, Cluster, Redis, Setup};
use super::internal::{signed, who};
use crate::support::peers;

/// The internal listener's `host:port` of replica `i`.
fn internal_addr(c: &Cluster, i: usize) -> String {
    let url = c.internal_url(i);
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .expect("host:port")
        .to_owned()
}

/// A request head for the internal path with `headers`, sent alone (no body byte follows).
fn head(headers: &[(String, String)]) -> Vec<u8> {
    let mut h = "POST /internal/v1/mcp HTTP/1.1\r\nhost: replica\r\n".to_owned();
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h.into_bytes()
}

/// Sends `head` and no body; gives the answer's status and whether the server then closed the
/// connection (both waited for at most 20 s: the answer to a head whose body never comes).
async fn answer_to_head_alone(addr: &str, head: &[u8]) -> (u16, bool) {
    let mut s = TcpStream::connect(addr)
        .await
        .expect("connect to the internal listener");
    s.write_all(head).await.expect("send the head");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .unwrap_or(false);
    let text = String::from_utf8_lossy(&got);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, closed)
}

/// The headers of a signed forward, as (name, value) lines.
fn peer_headers(h: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().expect("ASCII").to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_is_refused_from_its_head_before_any_of_its_body_is_sent() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url)).await;
    let addr = internal_addr(&c, 0);
    let (post, alice) = (http::Method::POST, who("alice", &[]));
    let big = 4 * 1024 * 1024;
    // A head with every peer header, well formed, for this replica, fresh, with a tag that does
    // not verify, declaring 4 MiB: answered 401 at once, the body never read.
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let forged: Vec<(String, String)> = [
        ("content-type", "application/json".to_owned()),
        ("content-length", big.to_string()),
        ("x-sluice-peer", "r9".into()),
        ("x-sluice-peer-to", "r1".into()),
        ("x-sluice-peer-time", sluice::state::now_ms().to_string()),
        ("x-sluice-peer-nonce", "n".into()),
        ("x-sluice-peer-principal", b64(br#"{"id":"alice"}"#)),
        ("x-sluice-peer-length", big.to_string()),
        ("x-sluice-peer-digest", b64(&[0u8; 32])),
        ("x-sluice-peer-tag", format!("1.{}", b64(&[0u8; 16]))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(
        answer_to_head_alone(&addr, &head(&forged)).await,
        (401, true),
        "a forged head, its body never sent"
    );
    // Signed with the cluster's keys for a body over limits.max_body_bytes: 413, unread.
    let huge = vec![b' '; big + 1];
    let mut over = peer_headers(&signed(&keys(), ("r9", "r1"), &post, &alice, &[], &huge));
    over.push(("content-length".into(), huge.len().to_string()));
    assert_eq!(
        answer_to_head_alone(&addr, &head(&over)).await,
        (413, true),
        "a signed length over the body limit"
    );
    // Signed for one body, sent with another of the same length: refused.
    let http = reqwest::Client::new();
    let url = c.internal_url(0);
    let h = signed(&keys(), ("r9", "r1"), &post, &alice, &[], br#"{"a":1}"#);
    let swapped = http
        .post(&url)
        .headers(h)
        .body(r#"{"a":2}"#)
        .send()
        .await
        .expect("POST");
    assert_eq!(swapped.status(), 401, "a body that is not the signed one");
    c.replica(0)
        .logged(
            "a forwarded request's body is not the one its head signed",
            1,
        )
        .await;
    // A replica of the version before (it signs the body, sends no length): refused, and the
    // log says why.
    let mut old = signed(&keys(), ("r9", "r1"), &post, &alice, &[], b"{}");
    old.remove("x-sluice-peer-length");
    old.remove("x-sluice-peer-digest");
    assert_eq!(
        http.post(&url)
            .headers(old)
            .body("{}")
            .send()
            .await
            .expect("POST")
            .status(),
        401,
        "a v1 forward"
    );
    c.replica(0)
        .logged("the sending replica runs another version of Sluice", 1)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_holds_at_most_its_share_of_internal_connections() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).cluster("max_connections_per_source = 2"),
    )
    .await;
    let addr = internal_addr(&c, 0);
    // Two connections held (they send nothing yet): the source's share.
    let held = [
        TcpStream::connect(&addr).await.expect("connect"),
        TcpStream::connect(&addr).await.expect("connect"),
    ];
    // A third from the same source is closed at once, whatever it sends: no answer.
    let (status, closed) = answer_to_head_alone(&addr, &head(&[])).await;
    assert_eq!(
        (status, closed),
        (0, true),
        "the third connection is closed unanswered"
    );
    c.replica(0)
        .logged(
            "internal connection refused: this source holds cluster.max_connections_per_source",
            1,
        )
        .await;
    // One held closes: a new one is served again (401: it carries no peer headers).
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) =
            answer_to_head_alone(&addr, &head(&[("content-length".into(), "0".into())])).await;
        if status == 401 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no connection was served again after the held ones closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
