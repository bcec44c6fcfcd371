//! Bridge A and memory in `run`: one sampling round direct against the legacy mock and through
//! Sluice, in alternating chunks; then Sluice's growth with exchanges parked, and the
//! connections-only baseline (`hold`) that growth is compared with. Takes the run's [`Bench`];
//! gives the round times and the memory figures.

use std::time::Duration;

use http::Uri;
use sluice::upstream::client::HttpClient;

use super::http::start_sluice;
use super::Bench;
use crate::procs::rss_kib;

/// What the bridge A and memory parts measured (times in µs, memory in KiB).
pub(crate) struct Bridged {
    pub(crate) chunks: usize,
    pub(crate) per: usize,
    pub(crate) direct: Vec<Vec<f64>>,
    pub(crate) sluice: Vec<Vec<f64>>,
    pub(crate) first: Vec<Vec<f64>>,
    pub(crate) idle: u64,
    pub(crate) before_park: u64,
    pub(crate) after_park: u64,
    pub(crate) parked: usize,
    /// `hold`'s RSS before and after its connections, and how many it held.
    pub(crate) hold: (f64, f64, f64),
    /// The same over HTTP/2 (the streams of one connection).
    pub(crate) hold_h2: (f64, f64, f64),
}

/// Budgets raised past what the run asks for (one principal, thousands of sampling asks and
/// parked exchanges); no audit log.
pub(crate) fn config(cap: usize, legacy_url: &str) -> String {
    format!(
        "\n[audit]\nenabled = false\n\n[budget]\nsampling_per_window = 100000000\nsampling_burst = 100000000\ntokens_per_window = 4000000000\nmax_parked_per_principal = {cap}\n\n[bridge]\ngather_ms = 0\npark_ms = 600000\nmax_sessions = {cap}\nmax_sessions_per_principal = {cap}\nmax_parked = {cap}\n\n[[upstream]]\nname = \"legacy\"\nurl = \"{legacy_url}\"\nera = \"2025-11-25\"\n"
    )
}

/// Runs bridge A's rounds, then the memory figures.
pub(crate) async fn measure(b: &Bench<'_>) -> Result<Bridged, String> {
    let (env, me, c, plan) = (&b.env, &b.me, &b.c, b.plan);
    b.log("bridge A: legacy mock and Sluice");
    let mut legacy = env.spawn(
        "legacy-upstream",
        me,
        &["legacy-upstream".into(), "--parent-stdin".into()],
        &[],
        true,
    )?;
    let legacy_url = format!(
        "http://127.0.0.1:{}/mcp",
        legacy.line("LISTENING", Duration::from_secs(10))?
    );
    let cap = plan.parked + 256;
    let (bridge, bridge_url) = start_sluice(
        env,
        &b.o.sluice,
        "sluice-bridge",
        config(cap, &legacy_url),
        c,
    )
    .await?;
    let idle = rss_kib(bridge.pid()).unwrap_or(0);
    let (lu, bu): (Uri, Uri) = (
        legacy_url.parse().map_err(|e| format!("{e}"))?,
        bridge_url.parse().map_err(|e| format!("{e}"))?,
    );
    let chunks = plan.runs.max(5);
    let per = (plan.rounds / chunks).max(1);
    let (direct, sluice, first) = rounds(c, &lu, &bu, chunks, per).await?;

    b.log(&format!("memory: parking {} exchanges", plan.parked));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before_park = rss_kib(bridge.pid()).unwrap_or(0);
    let parked = crate::memory::park(c, &bu, plan.parked, 1_000_000).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_park = rss_kib(bridge.pid()).unwrap_or(0);
    drop((bridge, legacy));
    let hold = baseline(b, false).await?;
    let hold_h2 = baseline(b, true).await?;
    Ok(Bridged {
        chunks,
        per,
        direct,
        sluice,
        first,
        idle,
        before_park,
        after_park,
        parked,
        hold,
        hold_h2,
    })
}

type Chunks = Vec<Vec<f64>>;

/// `chunks` chunks of `per` rounds per side, the side that goes first alternating.
async fn rounds(
    c: &HttpClient,
    lu: &Uri,
    bu: &Uri,
    chunks: usize,
    per: usize,
) -> Result<(Chunks, Chunks, Chunks), String> {
    let (mut direct, mut sluice, mut first) = (Vec::new(), Vec::new(), Vec::new());
    let us = |v: &[Duration]| {
        v.iter()
            .map(|d| d.as_secs_f64() * 1e6)
            .collect::<Vec<f64>>()
    };
    for k in 0..chunks {
        let warm = if k == 0 { 20 } else { 2 };
        if k % 2 == 0 {
            direct.push(us(&crate::bridge::direct(c, lu, warm, per).await?));
        }
        let (all, one) = crate::bridge::via_sluice(c, bu, warm, per).await?;
        sluice.push(us(&all));
        first.push(us(&one));
        if k % 2 == 1 {
            direct.push(us(&crate::bridge::direct(c, lu, warm, per).await?));
        }
    }
    Ok((direct, sluice, first))
}

/// The connections-only baseline: `hold` opens as many upstream connections (over HTTP/2: streams
/// of one connection) as the parked exchanges held, and reports its own RSS before and after.
async fn baseline(b: &Bench<'_>, http2: bool) -> Result<(f64, f64, f64), String> {
    b.log(&format!(
        "memory: the connections-only baseline{}",
        if http2 { " over HTTP/2" } else { "" }
    ));
    let (env, me) = (&b.env, &b.me);
    let tag = if http2 { "-h2" } else { "" };
    let mut args = vec!["legacy-upstream".to_owned(), "--parent-stdin".into()];
    let mut hold = vec![
        "hold".to_owned(),
        "--n".into(),
        b.plan.parked.to_string(),
        "--parent-stdin".into(),
    ];
    if http2 {
        args.push("--http2".into());
        hold.push("--http2".into());
    }
    let mut legacy2 = env.spawn(&format!("legacy-upstream-2{tag}"), me, &args, &[], true)?;
    let legacy2_url = format!(
        "http://127.0.0.1:{}/mcp",
        legacy2.line("LISTENING", Duration::from_secs(10))?
    );
    hold.extend(["--url".into(), legacy2_url]);
    let mut holder = env.spawn(&format!("hold{tag}"), me, &hold, &[], true)?;
    let held = holder.line("HOLD", Duration::from_secs(120))?;
    drop((holder, legacy2));
    let held: Vec<f64> = held
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    match held.as_slice() {
        [before, after, n, ..] => Ok((*before, *after, n.max(1.0))),
        _ => Err(format!(
            "hold printed {held:?}, not its RSS before, after and count"
        )),
    }
}
