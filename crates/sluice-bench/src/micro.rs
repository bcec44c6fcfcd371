//! Micro benchmarks: timed loops over Sluice's own functions, in this process.
//!
//! Each figure is the median (and spread) of `batches` batches, a batch being as many calls as
//! fit in `batch` of wall time after a warm-up, timed in this thread's CPU time (wall time where
//! the kernel does not report it); the loop keeps its results alive with `black_box`. Measured: seal + open of a `requestState` (`sluice::state::Keys`), the front
//! door's parse + validation of the benchmark's ~1 KiB `tools/call` (`Envelope::parse`,
//! `validate::meta::read`, `validate::headers::check`), and, for the profile, the params digest
//! every forwarded call computes (`state::params_digest`) and the stamping of an upstream's
//! answer (`respond::finish`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use sluice::mcp::jsonrpc::Envelope;
use sluice::mcp::method::Method;
use sluice::state::{Keys, Sealed};

/// One micro figure: nanoseconds per operation, median and spread.
pub(crate) struct Micro {
    pub(crate) name: &'static str,
    pub(crate) what: &'static str,
    pub(crate) ns: (f64, f64, f64),
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`), when the kernel
/// says: on a machine shared with other work, wall time would count their turns too.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn time(batches: usize, batch: Duration, mut f: impl FnMut()) -> (f64, f64, f64) {
    // Warm-up, and the number of calls that fills one batch.
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < batch / 4 || calls < 10 {
        f();
        calls += 1;
    }
    let per_batch = ((calls as f64) * 4.0).max(10.0) as u64;
    let mut samples = Vec::with_capacity(batches);
    for _ in 0..batches {
        let (t, cpu) = (Instant::now(), thread_cpu_ns());
        for _ in 0..per_batch {
            f();
        }
        let ns = match (cpu, thread_cpu_ns()) {
            (Some(a), Some(b)) if b > a => (b - a) as f64,
            _ => t.elapsed().as_nanos() as f64,
        };
        samples.push(ns / per_batch as f64);
    }
    crate::procs::stats(&samples)
}

/// Runs the micro benchmarks (those whose name contains `only`, when given).
pub(crate) fn run(
    batches: usize,
    batch: Duration,
    only: Option<&str>,
) -> Result<Vec<Micro>, String> {
    let want = |name: &str| only.is_none_or(|o| name.contains(o));
    let all: [(&str, Bench); 4] = [
        (SEAL_OPEN, seal_open),
        (PARSE_VALIDATE, parse_validate),
        (PARAMS_DIGEST, params_digest),
        (STAMP, stamp),
    ];
    all.into_iter()
        .filter(|(name, _)| want(name))
        .map(|(_, bench)| bench(batches, batch))
        .collect()
}

type Bench = fn(usize, Duration) -> Result<Micro, String>;

const SEAL_OPEN: &str = "seal + open requestState";
const PARSE_VALIDATE: &str = "parse + validate envelope";
const PARAMS_DIGEST: &str = "params digest";
const STAMP: &str = "stamp upstream answer";

/// Seal + open of a requestState as bridge A writes it.
fn seal_open(batches: usize, batch: Duration) -> Result<Micro, String> {
    let keys = Keys::random();
    let now = sluice::state::now_ms();
    let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned();
    let method = Method::ToolsCall;
    let call = method.as_str();
    let sealed = Sealed {
        principal: "local".into(),
        method: call.into(),
        name: "sample".into(),
        digest: digest.clone(),
        upstream: "legacy".into(),
        round: 1,
        expires_ms: now + 60_000,
        owner: "local".into(),
        handle: Some("00112233445566778899aabbccddeeff".into()),
        kind: sluice::state::Kind::Bridge,
        extra: None,
        declined: Vec::new(),
        pending: None,
    };
    let token = keys.seal(&sealed);
    keys.open(&token, "local", call, "sample", &digest, now)
        .map_err(|e| format!("open failed: {e}"))?;
    Ok(Micro {
        name: SEAL_OPEN,
        what: "`Keys::seal` then `Keys::open` (HMAC-SHA256, base64url, JSON payload)",
        ns: time(batches, batch, || {
            let t = keys.seal(black_box(&sealed));
            let _ = black_box(keys.open(&t, "local", call, "sample", &digest, now));
        }),
    })
}

/// The front door's parse + validation of the benchmark call.
fn parse_validate(batches: usize, batch: Duration) -> Result<Micro, String> {
    let body = Bytes::from(crate::wire::tools_call(1, "echo"));
    let headers = crate::wire::modern_headers("echo");
    let env = Envelope::parse(body.clone()).map_err(|e| e.to_string())?;
    let meta = sluice::validate::meta::read(&env).map_err(|e| e.to_string())?;
    sluice::validate::headers::check(&headers, &env, &meta).map_err(|e| e.to_string())?;
    Ok(Micro {
        name: PARSE_VALIDATE,
        what: "`Envelope::parse` + `validate::meta::read` + `validate::headers::check` of the ~1 KiB `tools/call`",
        ns: time(batches, batch, || {
            let Ok(env) = Envelope::parse(black_box(body.clone())) else { return };
            let Ok(meta) = sluice::validate::meta::read(&env) else { return };
            let _ = black_box(sluice::validate::headers::check(&headers, &env, &meta));
        }),
    })
}

/// The digest of the canonical params, bound into the seal of every forwarded call's round
/// (computed whether or not the upstream asks for a round).
fn params_digest(batches: usize, batch: Duration) -> Result<Micro, String> {
    let env = Envelope::parse(Bytes::from(crate::wire::tools_call(1, "echo")))
        .map_err(|e| e.to_string())?;
    Ok(Micro {
        name: PARAMS_DIGEST,
        what: "`state::params_digest` of the call's params (canonical JSON, SHA-256)",
        ns: time(batches, batch, || {
            let _ = black_box(sluice::state::params_digest(black_box(&env).members()));
        }),
    })
}

/// Stamping the upstream's answer (resultType, serverInfo): on every forwarded call.
fn stamp(batches: usize, batch: Duration) -> Result<Micro, String> {
    let m = serde_json::json!({"io.modelcontextprotocol/serverInfo": {"name": "alpha", "version": "1.0.0"}});
    let answer = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": crate::wire::arg_text()}],
        "resultType": "complete", "_meta": m}})
    .to_string();
    let info = sluice::upstream::discover::server_info().to_string();
    Ok(Micro {
        name: STAMP,
        what: "`respond::finish` of the mock's ~1.2 KiB `tools/call` result",
        ns: time(batches, batch, || {
            let _ = black_box(sluice::respond::finish(
                "1",
                &Method::ToolsCall,
                "alpha",
                StatusCode::OK,
                black_box(&answer),
                None,
                &info,
            ));
        }),
    })
}
