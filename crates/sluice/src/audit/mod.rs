//! The audit log: one content-free JSON record per client request, written off the request path.
//!
//! Takes what each stage learns about a request (principal, method, name, upstream, eras, input
//! keys and their methods, round, policy rule and decision, budget left, status, code, latency,
//! bytes); gives exactly one record per request, also on errors and client disconnects (the
//! guard emits in `Drop`), through a bounded channel that a background task writes in batches
//! (stderr by default, or a file). Never records argument values, prompts, sampling messages,
//! elicitation content, results, `requestState`, tokens or keys: the record has no field that
//! could hold them. A full channel drops the record and counts it. Every line is one line in any
//! reader: what a peer chose is JSON-escaped, U+2028, U+2029, NEL and bidi controls included.

mod recent;
pub mod record;
use recent::Recent;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

pub use record::Record;

tokio::task_local! {
    static CURRENT: Arc<Mutex<Record>>;
}

/// Records something about the current request (no-op outside a request).
pub fn note(f: impl FnOnce(&mut Record)) {
    let _ = CURRENT.try_with(|r| {
        if let Ok(mut r) = r.lock() {
            f(&mut r);
        }
    });
}

/// Runs `fut` with a record to note into.
pub async fn scope<F: std::future::Future>(rec: Arc<Mutex<Record>>, fut: F) -> F::Output {
    CURRENT.scope(rec, fut).await
}

/// Spawns work of the current request (a relay, a bridge's rounds): what it notes lands in the
/// same record. Outside a request it is a plain `tokio::spawn`.
pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match CURRENT.try_with(Arc::clone) {
        Ok(rec) => tokio::spawn(CURRENT.scope(rec, fut)),
        Err(_) => tokio::spawn(fut),
    }
}

/// The sending side of the audit log.
#[derive(Clone)]
pub struct Audit {
    tx: Option<mpsc::Sender<Record>>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    /// Ends the writer ([`Audit::close`]): it writes what is queued, then stops.
    stop: tokio_util::sync::CancellationToken,
    /// Set once the writer has written its last batch.
    written: Arc<tokio::sync::watch::Sender<bool>>,
    /// The last records written, as written (the admin API's `audit`), when kept.
    recent: Option<Recent>,
}

impl Audit {
    /// An audit log writing to `sink` (`None` or `"stderr"`: stderr; else a file path), with a
    /// channel of `capacity` records. `enabled = false` writes nothing. The writer runs until
    /// [`Audit::close`] (after the server's drain, so the records of the requests it let finish
    /// are written too).
    pub fn start(enabled: bool, sink: Option<String>, capacity: usize) -> Audit {
        Audit::keeping(enabled, sink, capacity, 0)
    }

    /// [`Audit::start`], keeping the last `recent` records written for the admin API.
    pub fn keeping(enabled: bool, sink: Option<String>, capacity: usize, recent: usize) -> Audit {
        let recent = (recent > 0).then(|| Recent::new(recent));
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (stop, written) = (
            tokio_util::sync::CancellationToken::new(),
            Arc::new(tokio::sync::watch::channel(false).0),
        );
        if !enabled {
            written.send_replace(true);
            return Audit {
                tx: None,
                dropped,
                stop,
                written,
                recent,
            };
        }
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let (done, until, keep) = (written.clone(), stop.clone(), recent.clone());
        tokio::spawn(async move {
            write_batches(rx, sink, until, keep).await;
            done.send_replace(true);
        });
        Audit {
            tx: Some(tx),
            dropped,
            stop,
            written,
            recent,
        }
    }

    /// The last `limit` records written (oldest first), each as its JSON line was written.
    pub fn recent(&self, limit: usize) -> Vec<String> {
        self.recent
            .as_ref()
            .map(|r| r.last(limit))
            .unwrap_or_default()
    }

    /// Writes what is queued and stops the writer; waits for it at most `within`.
    pub async fn close(&self, within: std::time::Duration) {
        self.stop.cancel();
        let mut rx = self.written.subscribe();
        let _ = tokio::time::timeout(within, rx.wait_for(|w| *w)).await;
    }

    /// Records dropped because the channel was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes a record of something that is no client request (an upstream's tool quarantined
    /// or accepted: `pins/`), built by the caller.
    pub fn record(&self, r: Record) {
        self.emit(r);
    }

    fn emit(&self, r: Record) {
        if let Some(tx) = &self.tx {
            if tx.try_send(r).is_err() {
                self.dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// Records a writer takes at once without waiting for more.
const BATCH: usize = 256;
/// The most records one write carries.
const MAX_BATCH: usize = 4096;
/// How long a short batch waits for more records: the most a record waits to be written.
const FLUSH: std::time::Duration = std::time::Duration::from_millis(5);

async fn write_batches(
    mut rx: mpsc::Receiver<Record>,
    sink: Option<String>,
    shutdown: tokio_util::sync::CancellationToken,
    recent: Option<Recent>,
) {
    let mut out: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match sink.as_deref() {
        None | Some("stderr") => Box::new(tokio::io::stderr()),
        Some(path) => match tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .await
        {
            Ok(f) => Box::new(f),
            Err(e) => {
                tracing::error!(path, error = %e, "cannot open the audit file; audit records go to stderr");
                Box::new(tokio::io::stderr())
            }
        },
    };
    let mut batch = Vec::with_capacity(BATCH);
    let mut buf = Vec::with_capacity(BATCH * 256);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => n,
            _ = shutdown.cancelled() => { rx.close(); rx.recv_many(&mut batch, 4096).await }
        };
        if n == 0 {
            let _ = out.flush().await;
            return;
        }
        // A short batch waits FLUSH for more before it is written: while this task sleeps no
        // send wakes it, so under load the writer runs (and the sink's blocking write hands
        // off to a thread) a few hundred times a second, not once per request.
        if n < BATCH && !shutdown.is_cancelled() {
            tokio::select! {
                _ = tokio::time::sleep(FLUSH) => {}
                _ = shutdown.cancelled() => {}
            }
            while batch.len() < MAX_BATCH {
                let Ok(r) = rx.try_recv() else { break };
                batch.push(r);
            }
        }
        buf.clear();
        for r in batch.drain(..) {
            let from = buf.len();
            if serde_json::to_writer(&mut buf, &r).is_ok() {
                if let Some(keep) = &recent {
                    keep.keep(&buf[from..]);
                }
                buf.push(b'\n');
            }
        }
        // serde_json writes U+2028, U+2029, NEL and bidi controls as they are: a principal or a
        // name a peer chose could break or reorder the line in a reader. Escaped, same JSON.
        let text = if buf.is_ascii() {
            None
        } else {
            std::str::from_utf8(&buf).ok().map(crate::escape::line_safe)
        };
        let _ = out
            .write_all(text.as_ref().map_or(&buf[..], |t| t.as_bytes()))
            .await;
        let _ = out.flush().await;
    }
}

/// What counts each finished record (the metrics, `metrics.rs`): the audit log hands it the
/// record it writes, so the counts and the log never disagree; it names no counter of its own.
pub trait Observer: Send + Sync {
    /// Counts one finished request, `took` being the time to its response head.
    fn observe(&self, r: &Record, took: std::time::Duration);
}

/// Owns one request's record; emits it exactly once, in [`AuditGuard::finish`] or in `Drop`.
pub struct AuditGuard {
    audit: Audit,
    /// `None`: the record is written but not counted (a forward served here: the replica the
    /// client talked to counts the request).
    metrics: Option<Arc<dyn Observer>>,
    record: Arc<Mutex<Record>>,
    started: Instant,
    /// When the response head went out (a streamed answer is emitted later, when it ends).
    head: Option<std::time::Duration>,
    done: bool,
}

/// A streamed answer's record: it sees each frame (the last JSON-RPC response sets the error
/// code and input keys) and is emitted when the stream ends, so what the stream's own tasks
/// noted (a decision taken mid-stream) is in it.
pub struct StreamAudit(AuditGuard);

impl StreamAudit {
    /// The HTTP status its request was answered with, when not 200 (a stream relayed behind a
    /// 202: `respond::SseBody::relay_to`).
    pub fn status(&self, status: http::StatusCode) {
        if let Ok(mut r) = self.0.record.lock() {
            r.status = status.as_u16();
        }
    }

    /// Reads one SSE frame Sluice sends (`written`: its length on the wire).
    pub fn observe(&self, frame: &crate::mcp::sse::Frame, written: usize) {
        let Ok(mut r) = self.0.record.lock() else {
            return;
        };
        r.bytes_out += written as u64;
        if let Some(json) = frame.json().filter(|j| !j.is_empty()) {
            read_reply(&mut r, json);
        }
    }
}

impl AuditGuard {
    /// A record for a request that just arrived.
    pub fn new(audit: &Audit, metrics: Arc<dyn Observer>, bytes_in: u64) -> AuditGuard {
        let mut guard = AuditGuard::unmetered(audit, bytes_in);
        guard.metrics = Some(metrics);
        guard
    }

    /// A record for a request another replica forwarded here: written to the audit log, not
    /// counted in this replica's metrics (the entry replica counted it).
    pub fn unmetered(audit: &Audit, bytes_in: u64) -> AuditGuard {
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let record = Record {
            time_ms,
            client_era: "modern",
            bytes_in,
            full: audit.tx.is_some(),
            ..Record::default()
        };
        AuditGuard {
            audit: audit.clone(),
            metrics: None,
            record: Arc::new(Mutex::new(record)),
            started: Instant::now(),
            head: None,
            done: false,
        }
    }

    /// Keeps the record open for a streamed answer whose head is going out now.
    pub fn into_stream(mut self) -> StreamAudit {
        self.head = Some(self.started.elapsed());
        if let Ok(mut r) = self.record.lock() {
            r.status = 200;
        }
        StreamAudit(self)
    }

    /// The shared record, for [`scope`].
    pub fn record(&self) -> Arc<Mutex<Record>> {
        self.record.clone()
    }

    /// Completes the record from the reply (its status and JSON body) and emits it.
    pub fn finish(mut self, status: http::StatusCode, body: Option<&bytes::Bytes>) {
        if let Ok(mut r) = self.record.lock() {
            r.status = status.as_u16();
            r.bytes_out = body.map_or(0, |b| b.len() as u64);
            if let Some(b) = body {
                read_reply(&mut r, b);
            }
        }
        self.emit();
    }

    fn emit(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let mut r = self
            .record
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        // What a peer named is kept as `mcp/recorded.rs` keeps it (short, a URI without what may
        // carry content or credentials, an unknown method only when it reads as one): a record
        // (and the channel of them) stays small and content-free whatever the request carried.
        let method = r.method.as_deref().map(crate::mcp::method::Method::parse);
        let uri = method == Some(crate::mcp::method::Method::ResourcesRead);
        r.method = method
            .as_ref()
            .map(|m| crate::mcp::recorded::method(m).to_owned());
        if let Some(v) = r.name.as_mut() {
            *v = crate::mcp::recorded::name(v, uri);
        }
        let took = self.head.unwrap_or_else(|| self.started.elapsed());
        r.latency_us = took.as_micros() as u64;
        if r.status == 0 {
            r.status = 499; // the client went away before the answer
        }
        if let Some(m) = &self.metrics {
            m.observe(&r, took);
        }
        self.audit.emit(r);
    }
}

impl Drop for AuditGuard {
    fn drop(&mut self) {
        self.emit();
    }
}

/// Whether `body` (a JSON-RPC message Sluice wrote: `{"jsonrpc":"2.0","id":ID,…`) has
/// `"error"` as the member after its id. An id Sluice did not write that way reads as `true`,
/// so the body is then decoded whole.
fn is_error_body(body: &[u8]) -> bool {
    let Some(rest) = body.strip_prefix(b"{\"jsonrpc\":\"2.0\",\"id\":".as_slice()) else {
        return false;
    };
    let after = match rest.first() {
        // A string id: up to its closing quote, skipping escapes.
        Some(b'"') => {
            let mut i = 1;
            loop {
                match rest.get(i) {
                    Some(b'\\') => i += 2,
                    Some(b'"') => break i + 1,
                    Some(_) => i += 1,
                    None => return true,
                }
            }
        }
        _ => match rest.iter().position(|b| *b == b',') {
            Some(i) => i,
            None => return true,
        },
    };
    rest.get(after..)
        .is_none_or(|tail| !tail.starts_with(b",\"result\":"))
}

/// Reads the error code, or the input keys of an `input_required` result, from a reply body
/// (names and methods only).
fn read_reply(r: &mut Record, body: &[u8]) {
    #[derive(serde::Deserialize)]
    struct Msg {
        #[serde(default)]
        error: Option<Code>,
        #[serde(default)]
        result: Option<Res>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    #[derive(serde::Deserialize)]
    struct Res {
        #[serde(default, rename = "inputRequests")]
        input_requests: Option<std::collections::BTreeMap<String, Req>>,
    }
    #[derive(serde::Deserialize)]
    struct Req {
        #[serde(default)]
        method: String,
    }
    // Sluice wrote the body: an error is `"error"` right after the id; a result with input
    // requests names `"inputRequests"` somewhere. Anything else is not read at all.
    static INPUTS: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"inputRequests\""));
    if !is_error_body(body) && INPUTS.find(body).is_none() {
        return;
    }
    if let Ok(m) = serde_json::from_slice::<Msg>(body) {
        if let Some(e) = m.error {
            r.error_code = Some(e.code);
        }
        if let Some(reqs) = m.result.and_then(|x| x.input_requests) {
            // An upstream chose the keys and methods: kept only as tokens (`mcp/recorded.rs`).
            let method = |m: &str| {
                crate::mcp::recorded::method(&crate::mcp::method::Method::parse(m)).to_owned()
            };
            r.input_keys = reqs
                .into_iter()
                .map(|(k, v)| format!("{}={}", crate::mcp::recorded::token(&k), method(&v.method)))
                .collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replys_error_code_and_input_keys_are_read_and_a_plain_result_is_not_decoded() {
        let read = |body: &str| {
            let mut r = Record::default();
            read_reply(&mut r, body.as_bytes());
            (r.error_code, r.input_keys)
        };
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":"a\"b,","error":{"code":-32602,"message":"x"}}"#).0,
            Some(-32602)
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31020,"message":"x"}}"#).0,
            Some(-31020)
        );
        let ok = read(
            r#"{"jsonrpc":"2.0","id":"s\\","result":{"content":[{"type":"text","text":"\"error\":"}]}}"#,
        );
        assert_eq!(
            ok,
            (None, Vec::new()),
            "an error named inside a result is content, not an error"
        );
        let asks = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"k":{"method":"sampling/createMessage"}}}}"#;
        assert_eq!(read(asks).1, vec!["k=sampling/createMessage".to_owned()]);
        assert!(!is_error_body(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#));
        assert!(
            is_error_body(br#"{"jsonrpc":"2.0","id":"x"#),
            "cut short: decoded whole"
        );
    }
}
