//! `profile`'s sampled part: where the time goes under load (perf).
//!
//! Takes the profile's options and the mock's URLs; gives, for the forwarder and Sluice plain
//! each under wrk at 16 connections for `--secs`, a `perf record -e cpu-clock` of the target's
//! process and its reports by shared object and by symbol (`<dir>/perf-<target>-<dso|symbols>.txt`),
//! wrk's output beside them. Refuses nothing: where perf cannot sample it says so and records
//! nothing.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Output};
use std::thread::JoinHandle;

use sluice::upstream::client::HttpClient;

use super::{start, tool, Opts, Target};
use crate::procs::Env;
use crate::wire;

/// A sampled profile under load, where perf can sample.
pub(super) async fn sampled(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    upstreams: &[String],
    md: &mut String,
) -> Result<(), String> {
    let perf_ok = tool(
        "perf",
        &["record", "-e", "cpu-clock", "-o", "/dev/null", "true"],
    )
    .is_some_and(|t| !t.contains("not supported"));
    if perf_ok {
        let script = o.dir.join("call-echo.lua");
        std::fs::write(&script, wire::wrk_script("echo", None)).map_err(|e| e.to_string())?;
        for t in [Target::Forwarder, Target::Sluice] {
            eprintln!("perf: {} under wrk -c16 for {} s", t.name(), o.secs);
            let (p, url) = start(env, o, t, upstreams, &[], c, "perf").await?;
            let data = o.dir.join(format!("perf-{}.data", t.name()));
            let rec = record(p.pid(), &data, o.secs);
            let load = load(o.secs, &script, &url);
            let _ = rec.join();
            drop(p);
            if let Ok(out) = load {
                let _ = std::fs::write(o.dir.join(format!("wrk-{}.txt", t.name())), &out.stdout);
            }
            reports(o, t, &data);
        }
        let _ = writeln!(
            md,
            "Sampled profiles (`perf record -e cpu-clock`): `{}/perf-<target>-<dso|symbols>.txt`.",
            o.dir.display()
        );
    } else {
        let _ = writeln!(md, "perf cannot sample here: no sampled profile.");
    }
    Ok(())
}

/// Samples process `pid` for `secs` seconds into `data` (`perf record`), in a thread of its own
/// so that the load runs meanwhile.
fn record(pid: u32, data: &Path, secs: u64) -> JoinHandle<std::io::Result<Output>> {
    let pid = pid.to_string();
    let secs = secs.to_string();
    let data_s = data.display().to_string();
    std::thread::spawn(move || {
        Command::new("timeout")
            .args([
                "60",
                "perf",
                "record",
                "-e",
                "cpu-clock",
                "-F",
                "2999",
                "-p",
                &pid,
                "-o",
                &data_s,
                "--",
                "sleep",
                &secs,
            ])
            .output()
    })
}

/// The load while perf samples: wrk at 16 connections on `url` for `secs` seconds with `script`.
fn load(secs: u64, script: &Path, url: &str) -> std::io::Result<Output> {
    Command::new("timeout")
        .args([
            "60",
            "wrk",
            "-t1",
            "-c16",
            &format!("-d{secs}s"),
            "-s",
            &script.display().to_string(),
            url,
        ])
        .output()
}

/// perf's reports of `data`, by shared object and by symbol, written beside it.
fn reports(o: &Opts, t: Target, data: &Path) {
    let d = data.display().to_string();
    for (kind, sort) in [("dso", "dso"), ("symbols", "dso,sym")] {
        if let Some(text) = tool(
            "perf",
            &[
                "report",
                "-i",
                &d,
                "--stdio",
                "--no-children",
                "--sort",
                sort,
                "--percent-limit",
                "0.7",
            ],
        ) {
            let _ = std::fs::write(o.dir.join(format!("perf-{}-{kind}.txt", t.name())), text);
        }
    }
}
