//! Scale figures of `run` (issue 14): how Sluice's costs grow with what it holds.
//!
//! Federation: 10, 100 and 500 upstreams (one mock process, one listener per upstream): startup
//! to ready, idle RSS, the federated `tools/list` (first and warm) and a call's latency, which
//! must not grow with the number of upstreams. Parked exchanges: 1k, 10k and 50k bridge-A
//! exchanges parked (each holds two upstream connections, so a size is capped by the open-files
//! limit, and the cap is printed): RSS per exchange and the idle CPU the sweep costs. Client
//! sessions and idle connections are in [`super::sessions`], a stdio server's processes in
//! [`super::stdio`]. Each size gets fresh processes.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use serde_json::{json, Value};
use sluice::upstream::client::HttpClient;

use super::http::start_sluice;
use super::Bench;
use crate::procs::{rss_kib, stats};
use crate::wire;

/// One federation size.
pub(crate) struct Fed {
    pub(crate) n: usize,
    pub(crate) ready_ms: f64,
    pub(crate) idle_kib: u64,
    pub(crate) list_first_us: f64,
    pub(crate) list_warm_us: f64,
    pub(crate) tools: usize,
    pub(crate) call_p50_us: f64,
    pub(crate) after_kib: u64,
}

/// One parked size.
pub(crate) struct Parked {
    /// Asked for, and measured (capped by the open-files limit).
    pub(crate) asked: usize,
    pub(crate) n: usize,
    pub(crate) before_kib: u64,
    pub(crate) after_kib: u64,
    /// Sluice's CPU while idle with them parked (ms of CPU per second).
    pub(crate) idle_cpu_ms_per_s: f64,
    pub(crate) park_s: f64,
    /// Over HTTP/2 (`http2 = true`: every exchange's streams on one connection).
    pub(crate) http2: bool,
}

fn fed_config(ports: &[u16]) -> String {
    let mut s = String::from("\n[audit]\nenabled = false\n");
    for (i, p) in ports.iter().enumerate() {
        s.push_str(&format!(
            "\n[[upstream]]\nname = \"u{i}\"\nurl = \"http://127.0.0.1:{p}/mcp\"\n"
        ));
    }
    s
}

fn list_body(id: u64) -> Bytes {
    Bytes::from(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": wire::meta(json!({}))}}).to_string())
}

/// One modern request; gives its time and the answer's JSON.
async fn timed(
    c: &HttpClient,
    url: &Uri,
    method: &'static str,
    name: &str,
    body: Bytes,
) -> Result<(f64, Value), String> {
    let mut h = wire::modern_headers(name);
    h.insert("mcp-method", http::HeaderValue::from_static(method));
    if name.is_empty() {
        h.remove("mcp-name");
    }
    let t0 = Instant::now();
    let v = crate::bridge::post_json(c, url, h, body)
        .await
        .map_err(|e| format!("{method}: {e}"))?;
    Ok((t0.elapsed().as_secs_f64() * 1e6, v))
}

/// Federates `n` upstreams and measures them.
async fn federate(b: &Bench<'_>, n: usize, calls: usize) -> Result<Fed, String> {
    let (env, me, c) = (&b.env, &b.me, &b.c);
    let mut args = vec!["modern-upstream".to_owned(), "--parent-stdin".to_owned()];
    for i in 0..n {
        args.extend(["--name".to_owned(), format!("u{i}")]);
    }
    let mut mock = env.spawn(&format!("scale-mock-{n}"), me, &args, &[], true)?;
    let ports: Vec<u16> = mock
        .line("LISTENING", Duration::from_secs(30))?
        .split_whitespace()
        .map(|p| p.parse().map_err(|e| format!("{e}")))
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let (sluice, url) = start_sluice(
        env,
        &b.o.sluice,
        &format!("sluice-fed-{n}"),
        fed_config(&ports),
        c,
    )
    .await?;
    let ready_ms = t0.elapsed().as_secs_f64() * 1e3;
    let idle_kib = rss_kib(sluice.pid()).unwrap_or(0);
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let (list_first_us, v) = timed(c, &uri, "tools/list", "", list_body(1)).await?;
    let tools = v["result"]["tools"].as_array().map_or(0, Vec::len);
    if tools != n {
        return Err(format!(
            "{n} upstreams federated {tools} tools (expected one per upstream): {}",
            v["result"]["tools"]
        ));
    }
    let mut warm = Vec::new();
    for i in 0..20 {
        warm.push(timed(c, &uri, "tools/list", "", list_body(2 + i)).await?.0);
    }
    // Calls spread over the upstreams, first, middle and last alike.
    let mut lat = Vec::with_capacity(calls);
    for i in 0..calls + 20 {
        let name = format!("u{}__echo", (i * 7919) % n);
        let (us, v) = timed(
            c,
            &uri,
            "tools/call",
            &name,
            wire::bytes(wire::tools_call(100 + i as u64, &name)),
        )
        .await?;
        if v["result"]["resultType"] != "complete" {
            return Err(format!("call of {name} with {n} upstreams ended in {v}"));
        }
        if i >= 20 {
            lat.push(us);
        }
    }
    let after_kib = rss_kib(sluice.pid()).unwrap_or(0);
    drop((sluice, mock));
    Ok(Fed {
        n,
        ready_ms,
        idle_kib,
        list_first_us,
        list_warm_us: stats(&warm).0,
        tools,
        call_p50_us: stats(&lat).0,
        after_kib,
    })
}

/// The open-files limit of this process (children inherit it).
pub(crate) fn nofile() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(1024)
}

/// CPU time (user + system) of a process so far, in ms.
fn cpu_ms(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0) // USER_HZ is 100 on Linux.
}

/// Parks `asked` exchanges (over HTTP/1.1 capped by the open-files limit) and measures them.
async fn park(b: &Bench<'_>, asked: usize, idle: Duration, http2: bool) -> Result<Parked, String> {
    let (env, me, c) = (&b.env, &b.me, &b.c);
    // Over HTTP/1.1 two upstream connections per exchange in Sluice and in the mock, and some to
    // spare; over HTTP/2 one connection.
    let n = if http2 {
        asked
    } else {
        asked.min(nofile().saturating_sub(600) / 2).max(1)
    };
    let tag = if http2 { "-h2" } else { "" };
    let mut args = vec!["legacy-upstream".to_owned(), "--parent-stdin".into()];
    if http2 {
        args.push("--http2".into());
    }
    let mut legacy = env.spawn(&format!("scale-legacy-{asked}{tag}"), me, &args, &[], true)?;
    let legacy_url = format!(
        "http://127.0.0.1:{}/mcp",
        legacy.line("LISTENING", Duration::from_secs(10))?
    );
    // The upstream's table is the config's last: a key appended is its.
    let cfg =
        super::bridge_a::config(n + 256, &legacy_url) + if http2 { "http2 = true\n" } else { "" };
    let (sluice, url) = start_sluice(
        env,
        &b.o.sluice,
        &format!("sluice-park-{asked}{tag}"),
        cfg,
        c,
    )
    .await?;
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    crate::memory::park(c, &uri, 16, 1).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before_kib = rss_kib(sluice.pid()).unwrap_or(0);
    let t0 = Instant::now();
    let got = crate::memory::park(c, &uri, n, 1_000).await?;
    let park_s = t0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_kib = rss_kib(sluice.pid()).unwrap_or(0);
    let cpu0 = cpu_ms(sluice.pid()).unwrap_or(0.0);
    tokio::time::sleep(idle).await;
    let idle_cpu_ms_per_s = (cpu_ms(sluice.pid()).unwrap_or(0.0) - cpu0) / idle.as_secs_f64();
    drop((sluice, legacy));
    Ok(Parked {
        asked,
        n: got,
        before_kib,
        after_kib,
        idle_cpu_ms_per_s,
        park_s,
        http2,
    })
}

/// Sizes of the scale part (smoke: small ones, same code).
pub(crate) struct Sizes {
    pub(crate) upstreams: &'static [usize],
    pub(crate) parked: &'static [usize],
    pub(crate) parked_h2: &'static [usize],
    pub(crate) sessions: &'static [usize],
    pub(crate) conns: &'static [usize],
    pub(crate) stdio: &'static [usize],
}

pub(crate) fn sizes(smoke: bool) -> Sizes {
    if smoke {
        Sizes {
            upstreams: &[2, 5, 10],
            parked: &[50, 100, 200],
            parked_h2: &[50, 100, 200],
            sessions: &[50, 200],
            conns: &[100, 200, 400],
            stdio: &[10],
        }
    } else {
        Sizes {
            upstreams: &[10, 100, 500],
            parked: &[1_000, 5_000, 10_000, 50_000],
            parked_h2: &[1_000, 10_000, 50_000],
            sessions: &[1_000, 10_000],
            conns: &[1_000, 5_000, 10_000],
            stdio: &[10, 100],
        }
    }
}

/// Everything the scale part measured.
#[derive(Default)]
pub(crate) struct Scale {
    pub(crate) fed: Vec<Fed>,
    pub(crate) parked: Vec<Parked>,
    pub(crate) sessions: Vec<super::sessions::Sessions>,
    pub(crate) conns: Vec<super::sessions::Conns>,
    pub(crate) stdio: Vec<super::stdio::StdioSessions>,
}

pub(crate) async fn measure(b: &Bench<'_>) -> Result<Scale, String> {
    let s = sizes(b.o.smoke);
    let (calls, idle) = if b.o.smoke {
        (50, Duration::from_millis(500))
    } else {
        (300, Duration::from_secs(5))
    };
    let mut fed = Vec::new();
    for &n in s.upstreams {
        b.log(&format!("scale: federating {n} upstreams"));
        fed.push(federate(b, n, calls).await?);
    }
    let mut parked = Vec::new();
    for &n in s.parked {
        b.log(&format!("scale: parking {n} exchanges"));
        parked.push(park(b, n, idle, false).await?);
    }
    for &n in s.parked_h2 {
        b.log(&format!("scale: parking {n} exchanges over HTTP/2"));
        parked.push(park(b, n, idle, true).await?);
    }
    let mut sessions = Vec::new();
    for &n in s.sessions {
        b.log(&format!("scale: {n} 2025-11-25 client sessions"));
        sessions.push(super::sessions::sessions(b, n, calls).await?);
    }
    let mut conns = Vec::new();
    for &n in s.conns {
        b.log(&format!("scale: {n} idle client connections"));
        conns.push(super::sessions::conns(b, n).await?);
    }
    let mut stdio = Vec::new();
    for &n in s.stdio {
        b.log(&format!(
            "scale: {n} client sessions of one principal to a stdio server"
        ));
        stdio.push(super::stdio::stdio_sessions(b, n).await?);
    }
    Ok(Scale {
        fed,
        parked,
        sessions,
        conns,
        stdio,
    })
}
