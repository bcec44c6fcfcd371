//! `profile`'s heap part: what Sluice keeps per parked exchange (massif).
//!
//! Takes the profile's options (the `system-alloc` build in `--heap-sluice`, `--parked`); gives,
//! from two massif runs of Sluice in front of a fresh legacy mock with a fifth of `--parked` and
//! then `--parked` exchanges parked, the peak heap (requested, and the allocator's overhead) per
//! exchange, and keeps ms_print's allocation tree of the larger run. Refuses nothing: without
//! the `system-alloc` build, or without valgrind, it writes no figure (the first says so).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use http::Uri;
use sluice::upstream::client::HttpClient;

use super::{tool, Opts};
use crate::procs::{self, Env};

/// Sluice in front of a fresh legacy mock under massif with `n` exchanges parked; gives the
/// peak snapshot's (`mem_heap_B`, `mem_heap_extra_B`).
async fn massif_parked(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    n: usize,
) -> Result<(u64, u64), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut legacy = env.spawn(
        &format!("legacy-upstream-{n}"),
        &me,
        &["legacy-upstream".into(), "--parent-stdin".into()],
        &[],
        true,
    )?;
    let legacy_url = format!(
        "http://127.0.0.1:{}/mcp",
        legacy.line("LISTENING", Duration::from_secs(10))?
    );
    let port = procs::free_port()?;
    let cfg = env.dir.join(format!("sluice-massif-{n}.toml"));
    let cap = n + 64;
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\n{loops}[audit]\nenabled = false\n[budget]\nsampling_per_window = 100000000\nsampling_burst = 100000000\n\
             max_parked_per_principal = {cap}\n[bridge]\ngather_ms = 0\npark_ms = 600000\nmax_sessions = {cap}\nmax_sessions_per_principal = {cap}\nmax_parked = {cap}\n\n\
             [[upstream]]\nname = \"legacy\"\nurl = \"{legacy_url}\"\nera = \"2025-11-25\"\n",
            loops = crate::wire::loops()
        ),
    )
    .map_err(|e| e.to_string())?;
    let out = o.dir.join(format!("massif-{n}.out"));
    let args = vec![
        "--tool=massif".to_owned(),
        format!("--massif-out-file={}", out.display()),
        o.heap_sluice.display().to_string(),
        "serve".into(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    let mut p = env.spawn(
        &format!("sluice-massif-{n}"),
        Path::new("valgrind"),
        &args,
        &[("RUST_LOG", "warn")],
        false,
    )?;
    let base = format!("http://127.0.0.1:{port}");
    procs::wait_ready(c, &base, Duration::from_secs(60)).await?;
    let url: Uri = format!("{base}/mcp").parse().map_err(|e| format!("{e}"))?;
    // One full round first (warms the session pool and the runtime), then park n.
    crate::bridge::via_sluice(c, &url, 0, 1).await?;
    crate::memory::park(c, &url, n, 1_000_000).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    if !p.terminate(Duration::from_secs(120)) {
        return Err("sluice under massif did not exit".into());
    }
    let _ = legacy.close_stdin(Duration::from_secs(5));
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    if let Some(t) = tool("ms_print", &[&out.display().to_string()]) {
        let _ = std::fs::write(o.dir.join(format!("massif-{n}.txt")), t);
    }
    // Snapshots are blocks of `key=value` lines; the peak one says `heap_tree=peak`.
    let mut cur = (0u64, 0u64);
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("mem_heap_B=") {
            cur.0 = v.parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("mem_heap_extra_B=") {
            cur.1 = v.parse().unwrap_or(0);
        } else if l == "heap_tree=peak" {
            return Ok(cur);
        }
    }
    Err(format!("{}: no peak snapshot", out.display()))
}

/// The heap of parked exchanges (massif): where Sluice's own state per exchange goes.
pub(super) async fn parked_heap(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    md: &mut String,
) -> Result<(), String> {
    if !o.heap_sluice.exists() {
        let _ = writeln!(
            md,
            "No heap profile: `{}` is missing (build it with `--features system-alloc`).\n",
            o.heap_sluice.display()
        );
        return Ok(());
    }
    if Command::new("valgrind").arg("--version").output().is_ok() {
        let (small, large) = (o.parked / 5, o.parked);
        let mut peaks = Vec::new();
        for n in [small, large] {
            eprintln!("massif: sluice (bridge A) with {n} parked exchanges");
            peaks.push(massif_parked(env, o, c, n).await?);
        }
        let heap = (peaks[1].0 as f64 - peaks[0].0 as f64) / (large - small) as f64;
        let extra = (peaks[1].1 as f64 - peaks[0].1 as f64) / (large - small) as f64;
        let _ = writeln!(
            md,
            "#### Heap per parked exchange (massif peak with {large} parked minus peak with {small}, over the difference)\n\n\
             | figure | bytes per exchange |\n|---|---|\n| heap requested (`mem_heap_B`) | {heap:.0} |\n| allocator overhead (`mem_heap_extra_B`) | {extra:.0} |\n\n\
             Allocation tree at the peak: `{}/massif-{large}.txt` (ms_print).\n",
            o.dir.display()
        );
    }

    Ok(())
}
