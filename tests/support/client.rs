//! The client side: modern requests, whole answers, SSE streams read event by event, and raw
//! HTTP/1.1 for exact header spelling and arbitrary `Host` values.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{V, WAIT};

/// The `_meta` envelope every modern request carries.
pub(crate) fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
    })
}

/// A modern request, well formed unless a test says otherwise.
pub(crate) struct Req {
    id: Option<Value>,
    method: String,
    params: Value,
    headers: Vec<(String, Vec<u8>)>,
    removed: Vec<String>,
    body: Option<Vec<u8>>,
}

impl Req {
    /// `method` with id 1, params `{_meta}` and the mirrored headers.
    pub(crate) fn new(method: &str) -> Self {
        Req {
            id: Some(json!(1)),
            method: method.to_owned(),
            params: json!({"_meta": meta()}),
            headers: Vec::new(),
            removed: Vec::new(),
            body: None,
        }
    }

    /// Sets the id.
    pub(crate) fn id(mut self, id: Value) -> Self {
        self.id = Some(id);
        self
    }

    /// Makes it a notification.
    pub(crate) fn notification(mut self) -> Self {
        self.id = None;
        self
    }

    /// Adds params members (the default `_meta` stays unless `p` has its own).
    pub(crate) fn params(mut self, p: Value) -> Self {
        if let Value::Object(m) = p {
            for (k, v) in m {
                self.params[k] = v;
            }
        }
        self
    }

    /// Replaces `_meta`.
    pub(crate) fn meta(mut self, m: Value) -> Self {
        self.params["_meta"] = m;
        self
    }

    /// Sets one `_meta` member.
    pub(crate) fn meta_member(mut self, k: &str, v: Value) -> Self {
        self.params["_meta"][k] = v;
        self
    }

    /// Drops `_meta`.
    pub(crate) fn no_meta(mut self) -> Self {
        if let Some(o) = self.params.as_object_mut() {
            o.remove("_meta");
        }
        self
    }

    /// Sets a header (replacing the default of that name).
    pub(crate) fn header(self, k: &str, v: &str) -> Self {
        self.header_bytes(k, v.as_bytes())
    }

    /// Sets a header with raw bytes.
    pub(crate) fn header_bytes(mut self, k: &str, v: &[u8]) -> Self {
        let k = k.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != k);
        self.headers.push((k, v.to_vec()));
        self
    }

    /// Leaves out a default header.
    pub(crate) fn without(mut self, k: &str) -> Self {
        self.removed.push(k.to_ascii_lowercase());
        self
    }

    /// Sends these bytes instead of the built body.
    pub(crate) fn raw_body(mut self, b: impl Into<Vec<u8>>) -> Self {
        self.body = Some(b.into());
        self
    }

    /// The JSON body.
    pub(crate) fn body_json(&self) -> Value {
        let mut b = json!({"jsonrpc": "2.0", "method": self.method, "params": self.params});
        if let Some(id) = &self.id {
            b["id"] = id.clone();
        }
        b
    }

    /// The headers and body as sent.
    pub(crate) fn build(&self) -> (Vec<(String, Vec<u8>)>, Vec<u8>) {
        let mut h: Vec<(String, Vec<u8>)> = vec![
            ("content-type".into(), b"application/json".to_vec()),
            (
                "accept".into(),
                b"application/json, text/event-stream".to_vec(),
            ),
            ("mcp-protocol-version".into(), V.as_bytes().to_vec()),
            ("mcp-method".into(), self.method.as_bytes().to_vec()),
        ];
        let member = match self.method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            _ => None,
        };
        if let Some(v) = member
            .and_then(|m| self.params.get(m))
            .and_then(Value::as_str)
        {
            h.push((
                "mcp-name".into(),
                sluice::mcp::headers::encode(v).into_owned().into_bytes(),
            ));
        }
        h.retain(|(k, _)| !self.removed.contains(k) && !self.headers.iter().any(|(n, _)| n == k));
        h.extend(self.headers.iter().cloned());
        let body = self
            .body
            .clone()
            .unwrap_or_else(|| self.body_json().to_string().into_bytes());
        (h, body)
    }

    fn request(&self, url: &str) -> reqwest::RequestBuilder {
        let (headers, body) = self.build();
        let mut rb = client().post(url);
        for (k, v) in headers {
            rb = rb.header(
                k,
                reqwest::header::HeaderValue::from_bytes(&v).expect("header value"),
            );
        }
        rb.body(body)
    }

    /// Sends and reads the whole answer.
    pub(crate) async fn send(self, url: &str) -> Resp {
        let resp = tokio::time::timeout(WAIT, self.request(url).send())
            .await
            .expect("answer within 10 s")
            .expect("request sent");
        Resp::read(resp).await
    }

    /// Sends and keeps the answer open as an SSE stream.
    pub(crate) async fn stream(self, url: &str) -> Stream {
        let resp = tokio::time::timeout(WAIT, self.request(url).send())
            .await
            .expect("answer within 10 s")
            .expect("request sent");
        Stream {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            resp,
            buf: String::new(),
        }
    }
}

/// One reqwest client for the whole binary.
pub(crate) fn client() -> reqwest::Client {
    static C: OnceLock<reqwest::Client> = OnceLock::new();
    C.get_or_init(|| {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("client")
    })
    .clone()
}

/// A whole answer.
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) text: String,
}

impl Resp {
    async fn read(resp: reqwest::Response) -> Self {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = tokio::time::timeout(WAIT, resp.text())
            .await
            .expect("body within 10 s")
            .expect("body");
        Resp {
            status,
            headers,
            text,
        }
    }

    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as one compact JSON object (asserts both).
    pub(crate) fn json(&self) -> Value {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "JSON answer expected: {} {}",
            self.status,
            self.text
        );
        assert_compact(&self.text);
        let v: Value = serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not one JSON value ({e}): {}", self.text));
        assert!(v.is_object(), "not an object: {}", self.text);
        v
    }

    /// Asserts a JSON-RPC error with this status, code and id; gives the error object.
    pub(crate) fn error(&self, status: u16, code: i64, id: &Value) -> Value {
        let v = self.json();
        assert_eq!(
            (self.status, v["error"]["code"].as_i64()),
            (status, Some(code)),
            "{}",
            self.text
        );
        assert_eq!(
            &v["id"], id,
            "error must carry the request id: {}",
            self.text
        );
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "error message: {}",
            self.text
        );
        v["error"].clone()
    }

    /// Asserts a 200 JSON-RPC result stamped by Sluice (resultType, serverInfo) with this id.
    pub(crate) fn result(&self, id: &Value) -> Value {
        let v = self.json();
        assert_eq!(self.status, 200, "{}", self.text);
        assert_eq!(&v["id"], id, "{}", self.text);
        let r = v["result"].clone();
        assert_result_stamped(&r);
        r
    }

    /// The SSE events of an event-stream body, each asserted to hold one `data:` line.
    pub(crate) fn events(&self) -> Vec<Value> {
        assert_eq!(
            self.header("content-type"),
            Some("text/event-stream"),
            "{}",
            self.text
        );
        let mut out = Vec::new();
        for block in self.text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            out.push(parse_event(block));
        }
        out
    }
}

/// Asserts what every result Sluice sends must carry.
pub(crate) fn assert_result_stamped(r: &Value) {
    assert!(
        r["resultType"].is_string(),
        "result without resultType: {r}"
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sluice",
        "result without Sluice's serverInfo: {r}"
    );
}

/// Asserts the text is JSON with no whitespace outside strings.
pub(crate) fn assert_compact(text: &str) {
    let (mut in_str, mut esc) = (false, false);
    for c in text.chars() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
        } else {
            assert!(!c.is_whitespace(), "body is not compact JSON: {text:?}");
        }
    }
}

fn parse_event(block: &str) -> Value {
    let data: Vec<&str> = block
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .collect();
    assert_eq!(
        data.len(),
        1,
        "each SSE event must carry exactly one data: line: {block:?}"
    );
    let text = data[0].strip_prefix(' ').unwrap_or(data[0]);
    for l in block.lines() {
        let field = l.split(':').next().unwrap_or("");
        assert!(
            l.is_empty()
                || l.starts_with(':')
                || matches!(field, "data" | "event" | "id" | "retry"),
            "stray SSE line: {l:?} in {block:?}"
        );
    }
    assert_compact(text);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {text}"))
}

/// An SSE answer read event by event.
pub(crate) struct Stream {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    resp: reqwest::Response,
    buf: String,
}

impl Stream {
    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The next event's message, `None` when the stream ended; panics after `within`.
    pub(crate) async fn next_within(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                if block.trim().is_empty()
                    || block.lines().all(|l| l.starts_with(':') || l.is_empty())
                {
                    continue;
                }
                return Some(parse_event(&block));
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .expect("SSE event within the deadline");
            match chunk {
                Ok(Some(c)) => self.buf.push_str(&String::from_utf8_lossy(&c)),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// The next event's message within [`WAIT`].
    pub(crate) async fn next(&mut self) -> Option<Value> {
        self.next_within(WAIT).await
    }

    /// Whether nothing arrives for `quiet`.
    pub(crate) async fn silent_for(&mut self, quiet: Duration) -> bool {
        if self.buf.contains("data:") {
            return false;
        }
        tokio::time::timeout(quiet, self.resp.chunk())
            .await
            .is_err()
    }
}

// ============================================================================================
// Raw HTTP/1.1 (exact header spelling, arbitrary Host)
// ============================================================================================

/// A raw answer: status, head text (lower-cased) and body.
pub(crate) struct Raw {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

/// Sends `head_lines` (without the request line and the Content-Length) and `body` as written.
pub(crate) async fn raw_post(
    addr: SocketAddr,
    path: &str,
    head_lines: &[String],
    body: &str,
) -> Raw {
    let mut req = format!("POST {path} HTTP/1.1\r\n");
    for l in head_lines {
        req.push_str(l);
        req.push_str("\r\n");
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("answer within 10 s")
        .expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Raw { status, head, body }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Headers of a well-formed `server/discover` with the given Host (and Origin).
pub(crate) fn discover_head(host: &str, origin: Option<&str>) -> (Vec<String>, String) {
    let mut h = vec![
        format!("Host: {host}"),
        "Content-Type: application/json".to_owned(),
        "Accept: application/json, text/event-stream".to_owned(),
        format!("MCP-Protocol-Version: {V}"),
        "Mcp-Method: server/discover".to_owned(),
    ];
    if let Some(o) = origin {
        h.push(format!("Origin: {o}"));
    }
    (h, Req::new("server/discover").body_json().to_string())
}
