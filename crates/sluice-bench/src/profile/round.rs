//! `profile`'s bridge A part: where a sampling round's time goes.
//!
//! Takes the profile's options; gives, for one round through Sluice in front of the fast legacy
//! mock (the same config as `run`'s bridge A row): the instructions Sluice executes per round
//! (callgrind, a warm-up count of rounds subtracted from a longer run, as for the HTTP call),
//! and, outside valgrind, how many times Sluice's threads and the mock's block and are woken
//! again per round (voluntary context switches, summed over every thread in `/proc/<pid>/task`),
//! next to the same count for a round straight to the mock and for a plain call through Sluice.
//! A round's added latency that its instructions do not explain is those hand-offs.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use http::Uri;
use sluice::upstream::client::HttpClient;

use super::{callgrind_total, tool, Opts};
use crate::procs::{self, Env, Proc};

/// Voluntary and involuntary context switches of every thread of `pid` so far.
fn switches(pid: u32) -> (u64, u64) {
    let mut sum = (0, 0);
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return sum;
    };
    for t in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        for l in text.lines() {
            if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:") {
                sum.0 += v.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(v) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                sum.1 += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    sum
}

fn p50(v: &[Duration]) -> f64 {
    let us: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    crate::procs::percentile(&us, 50.0)
}

/// Starts the legacy mock; gives it and its URL.
fn legacy(env: &Env, tag: &str) -> Result<(Proc, String), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut p = env.spawn(
        &format!("legacy-upstream-{tag}"),
        &me,
        &["legacy-upstream".into(), "--parent-stdin".into()],
        &[],
        true,
    )?;
    let url = format!(
        "http://127.0.0.1:{}/mcp",
        p.line("LISTENING", Duration::from_secs(10))?
    );
    Ok((p, url))
}

/// Sluice with `run`'s bridge A config in front of `legacy_url`, under `wrapper` when given.
async fn sluice(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    legacy_url: &str,
    wrapper: &[String],
    tag: &str,
) -> Result<(Proc, Uri), String> {
    let port = procs::free_port()?;
    let cfg = env.dir.join(format!("sluice-round-{tag}.toml"));
    let text = format!(
        "listen = \"127.0.0.1:{port}\"\n{}{}",
        crate::wire::loops(),
        crate::run::bridge_a::config(64, legacy_url)
    );
    std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
    let cmd = [
        "serve".to_owned(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    let (program, args): (PathBuf, Vec<String>) = match wrapper.split_first() {
        Some((w, rest)) => (
            w.into(),
            rest.iter()
                .cloned()
                .chain([o.sluice.display().to_string()])
                .chain(cmd)
                .collect(),
        ),
        None => (o.sluice.clone(), cmd.to_vec()),
    };
    let p = env.spawn(
        &format!("sluice-round-{tag}"),
        &program,
        &args,
        &[("RUST_LOG", "info")],
        false,
    )?;
    let base = format!("http://127.0.0.1:{port}");
    procs::wait_ready(c, &base, Duration::from_secs(60)).await?;
    Ok((
        p,
        format!("{base}/mcp").parse().map_err(|e| format!("{e}"))?,
    ))
}

/// Instructions per round under callgrind.
async fn instructions(env: &Env, o: &Opts, c: &HttpClient, md: &mut String) -> Result<(), String> {
    let (warm, n) = ((o.requests / 20).max(20), (o.requests / 4).max(50));
    let mut totals = Vec::new();
    for rounds in [warm, warm + n] {
        let (mut mock, url) = legacy(env, &format!("cg{rounds}"))?;
        let out = o.dir.join(format!("callgrind-round-{rounds}.out"));
        let wrapper = [
            "valgrind".to_owned(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", out.display()),
        ];
        eprintln!("callgrind: sluice (bridge A) for {rounds} rounds");
        let (mut p, su) = sluice(env, o, c, &url, &wrapper, &format!("cg{rounds}")).await?;
        crate::bridge::via_sluice(c, &su, 0, rounds).await?;
        if !p.terminate(Duration::from_secs(120)) {
            return Err("sluice (bridge A) under valgrind did not exit".into());
        }
        let _ = mock.close_stdin(Duration::from_secs(5));
        totals.push(callgrind_total(&out)?);
    }
    let per = (totals[1] as f64 - totals[0] as f64) / n as f64;
    let big = o
        .dir
        .join(format!("callgrind-round-{}.out", warm + n))
        .display()
        .to_string();
    for (kind, flag) in [("inclusive", "--inclusive=yes"), ("self", "--inclusive=no")] {
        if let Some(text) = tool("callgrind_annotate", &[flag, "--threshold=99", &big]) {
            let _ = std::fs::write(o.dir.join(format!("annotate-round-{kind}.txt")), text);
        }
    }
    let _ = writeln!(
        md,
        "#### Bridge A: instructions per sampling round (callgrind; {n} rounds after {warm})\n\n\
         Sluice executes **{per:.0}** instructions per round (two client requests, the call and its ask \
         upstream, the answer POSTed upstream and the result). Annotations: `{}/annotate-round-<inclusive|self>.txt`.\n",
        o.dir.display()
    );
    Ok(())
}

/// Context switches per round (direct and through Sluice) and per plain call, outside valgrind.
async fn wakeups(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    upstreams: &[String],
    md: &mut String,
) -> Result<(), String> {
    let n = 500;
    let (mock, url) = legacy(env, "cs")?;
    let lu: Uri = url.parse().map_err(|e| format!("{e}"))?;
    crate::bridge::direct(c, &lu, 20, 1).await?;
    let m0 = switches(mock.pid());
    let direct = crate::bridge::direct(c, &lu, 0, n).await?;
    let m1 = switches(mock.pid());
    let (p, su) = sluice(env, o, c, &url, &[], "cs").await?;
    crate::bridge::via_sluice(c, &su, 20, 1).await?;
    let (s0, m2) = (switches(p.pid()), switches(mock.pid()));
    let (via, firsts) = crate::bridge::via_sluice(c, &su, 0, n).await?;
    let (s1, m3) = (switches(p.pid()), switches(mock.pid()));
    drop((p, mock));
    // A plain call through Sluice for scale: the same count per call of `echo`.
    let (mut plain, plain_url) =
        super::start(env, o, super::Target::Sluice, upstreams, &[], c, "cs").await?;
    super::drive(c, &plain_url, 50, super::Target::Sluice).await?;
    let q0 = switches(plain.pid());
    let t0 = std::time::Instant::now();
    super::drive(c, &plain_url, n, super::Target::Sluice).await?;
    let plain_mean = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let q1 = switches(plain.pid());
    let _ = super::stop(&mut plain, super::Target::Sluice);
    let per = |a: (u64, u64), b: (u64, u64)| {
        ((b.0 - a.0) as f64 / n as f64, (b.1 - a.1) as f64 / n as f64)
    };
    let (d, s, sm, q) = (per(m0, m1), per(s0, s1), per(m2, m3), per(q0, q1));
    let _ = writeln!(
        md,
        "#### Bridge A: context switches per round ({n} rounds, one at a time, outside valgrind)\n\n\
         | what | voluntary | involuntary |\n|---|---|---|\n\
         | the legacy mock, a round straight to it | {:.1} | {:.1} |\n\
         | the legacy mock, a round through Sluice | {:.1} | {:.1} |\n\
         | Sluice, a round | {:.1} | {:.1} |\n\
         | Sluice plain, one `tools/call` of `echo` (for scale) | {:.1} | {:.1} |\n\n\
         A voluntary switch is a thread that ran out of work and slept until woken: each is a hand-off \
         the round waits on (a futex wake and a scheduler turn, several µs each on this VM).\n\n\
         Wall time, same Rust client, one at a time (p50 µs): a round straight to the mock {:.0}; a round \
         through Sluice {:.0}, of which its first request {:.0}; a plain `tools/call` through Sluice {plain_mean:.0} (mean).\n",
        d.0,
        d.1,
        sm.0,
        sm.1,
        s.0,
        s.1,
        q.0,
        q.1,
        p50(&direct),
        p50(&via),
        p50(&firsts)
    );
    Ok(())
}

/// The bridge A part of the profile.
pub(super) async fn run(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    upstreams: &[String],
    md: &mut String,
) -> Result<(), String> {
    if Command::new("valgrind").arg("--version").output().is_ok() {
        instructions(env, o, c, md).await?;
    }
    wakeups(env, o, c, upstreams, md).await
}
