//! `sluice-bench profile`: where Sluice's time goes, compared with the do-nothing forwarder.
//!
//! Instructions per request (callgrind, repeatable whatever else the machine does): each of the
//! forwarder, Sluice plain and production-like runs under `valgrind --tool=callgrind` in front
//! of the modern mock with counting off; after a warm-up of a tenth of `--requests` calls,
//! counting is turned on (`callgrind_control -i on`) for `--requests` calls: their total divided
//! by their number is the cost of one call, start-up (which varies run to run: a clock's
//! calibration) excluded. `callgrind_annotate` of each run (inclusive and self) is kept. Then,
//! where `perf` can sample (`cpu-clock`), a sampled profile of each under wrk at 16 connections.
//! Writes `<dir>/profile.md` and the raw files beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use http::Uri;
use sluice::upstream::client::{Answer, HttpClient};

use crate::procs::{self, Env, Proc};
use crate::wire;

mod heap;
mod perf;
mod round;

/// Options of `profile`.
#[derive(clap::Args, Debug)]
pub(crate) struct Opts {
    /// The sluice binary to profile.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// The sluice binary the heap profile (massif) runs: built with the `system-alloc` feature,
    /// since massif sees only malloc and mimalloc takes its memory with mmap.
    #[arg(long, default_value = "target/sysalloc/release/sluice")]
    heap_sluice: PathBuf,
    /// Working directory for the callgrind and perf files.
    #[arg(long, default_value = "target/bench/profile")]
    dir: PathBuf,
    /// A file to append the pid of every started process to.
    #[arg(long)]
    pid_file: Option<PathBuf>,
    /// Calls counted per callgrind run (after a warm-up of a tenth as many).
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Seconds of perf sampling under load per target.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Exchanges parked in the larger massif run (the smaller parks a fifth as many).
    #[arg(long, default_value_t = 500)]
    parked: usize,
    /// Only the instruction counts (callgrind), for comparing builds quickly.
    #[arg(long)]
    instructions_only: bool,
    /// Only bridge A's round (instructions and context switches per round).
    #[arg(long)]
    bridge_only: bool,
}

async fn drive(c: &HttpClient, url: &str, n: usize, t: Target) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let (name, bearer) = if t == Target::SluiceProd {
        ("alpha__echo", Some(wire::API_KEY))
    } else {
        ("echo", None)
    };
    for i in 0..n {
        let body = wire::bytes(wire::tools_call(i as u64 + 1, name));
        match c
            .post(
                "target",
                &uri,
                wire::authed_headers(name, bearer),
                body,
                None,
            )
            .await
            .map_err(|e| e.to_string())?
        {
            Answer::Json(http::StatusCode::OK, _) => {}
            Answer::Json(s, b) | Answer::Status(s, b) => {
                return Err(format!("{url}: HTTP {s}: {}", String::from_utf8_lossy(&b)))
            }
            Answer::Sse(_) => return Err(format!("{url}: unexpected SSE")),
        }
    }
    Ok(())
}

fn callgrind_total(file: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    // `totals:` counts what was collected; `summary:` (first in the file) is 0 when counting
    // started off.
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).map(str::to_owned))
    };
    line("totals:")
        .or_else(|| line("summary:"))
        .as_deref()
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{}: no totals line", file.display()))
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Forwarder,
    /// Sluice plain: one upstream, no auth.
    Sluice,
    /// Sluice production-like: two upstreams federated, API-key auth.
    SluiceProd,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Forwarder => "forwarder",
            Target::Sluice => "sluice",
            Target::SluiceProd => "sluice-prod",
        }
    }
}

/// Under callgrind, glibc's `memcpy` never takes its `rep movsb` path. Callgrind counts every
/// iteration of `rep movsb` as an instruction, and glibc chooses that path above 4 KiB by the
/// two addresses (it avoids it when they alias within a page): the count of one 8 KB move of a
/// request's future then swung by ~7k per call between builds with the same code (issue 30's
/// run, `docs/benchmarks.md`). The vector loop's count follows the bytes moved, whatever the
/// addresses. Only the counted runs are tuned; perf samples glibc as it ships.
const NO_REP_MOVSB: &str = "glibc.cpu.x86_rep_movsb_threshold=100000000";

/// Starts a target in front of `upstreams` (the second only for production-like), under
/// `wrapper` (e.g. valgrind) when given; gives it and its URL.
async fn start(
    env: &Env,
    o: &Opts,
    t: Target,
    upstreams: &[String],
    wrapper: &[String],
    c: &HttpClient,
    tag: &str,
) -> Result<(Proc, String), String> {
    let (program, args) = command(env, o, t, upstreams, tag)?;
    let counted = wrapper.first().is_some_and(|w| w == "valgrind");
    let (program, args) = wrapped(wrapper, program, args);
    let vars: &[(&str, &str)] = if counted {
        &[("RUST_LOG", "info"), ("GLIBC_TUNABLES", NO_REP_MOVSB)]
    } else {
        &[("RUST_LOG", "info")]
    };
    let mut p = env.spawn(
        &format!("{}-{tag}", t.name()),
        &program,
        &args,
        vars,
        t == Target::Forwarder,
    )?;
    let url = url_of(env, t, &mut p, c, tag).await?;
    Ok((p, url))
}

/// The program and arguments that start target `t`; for a Sluice, writes its config first
/// (`<dir>/<target>-<tag>.toml`).
fn command(
    env: &Env,
    o: &Opts,
    t: Target,
    upstreams: &[String],
    tag: &str,
) -> Result<(PathBuf, Vec<String>), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let upstream = &upstreams[0];
    match t {
        Target::Forwarder => Ok((
            me,
            vec![
                "forwarder".to_owned(),
                "--to".into(),
                upstream.to_owned(),
                "--parent-stdin".into(),
            ],
        )),
        Target::Sluice | Target::SluiceProd => {
            let text = sluice_config(env, t, upstreams, tag)?;
            let cfg = env.dir.join(format!("{}-{tag}.toml", t.name()));
            std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
            Ok((
                o.sluice.clone(),
                vec![
                    "serve".to_owned(),
                    "--config".into(),
                    cfg.display().to_string(),
                ],
            ))
        }
    }
}

/// A Sluice target's config on a free port: plain (one upstream, no audit log) or
/// production-like (a second upstream, an API key, the audit log to `<dir>/audit-<tag>.log`,
/// emptied first).
fn sluice_config(env: &Env, t: Target, upstreams: &[String], tag: &str) -> Result<String, String> {
    let upstream = &upstreams[0];
    let port = procs::free_port()?;
    let mut text = format!(
        "listen = \"127.0.0.1:{port}\"\n{}\n[[upstream]]\nname = \"alpha\"\nurl = \"{upstream}\"\n",
        wire::loops()
    );
    if t == Target::SluiceProd {
        // As in `run`: API keys, the audit log to a file, the default policy.
        let key = sluice::auth::api_keys::hash_key(wire::API_KEY);
        let beta = upstreams
            .get(1)
            .ok_or("production-like needs a second upstream")?;
        let audit = env.dir.join(format!("audit-{tag}.log"));
        let _ = std::fs::remove_file(&audit);
        text.push_str(&format!(
            "\n[[upstream]]\nname = \"beta\"\nurl = \"{beta}\"\n\n[[auth.api_keys]]\nsha256 = \"{key}\"\nprincipal = \"bench\"\n\n[audit]\nsink = \"{}\"\n",
            audit.display()
        ));
    } else {
        text.push_str("\n[audit]\nenabled = false\n");
    }
    Ok(text)
}

/// `program args` run under `wrapper` (its first word the program) when one is given.
fn wrapped(wrapper: &[String], program: PathBuf, mut args: Vec<String>) -> (PathBuf, Vec<String>) {
    if wrapper.is_empty() {
        (program, args)
    } else {
        let mut w = wrapper[1..].to_vec();
        w.push(program.display().to_string());
        w.append(&mut args);
        (PathBuf::from(&wrapper[0]), w)
    }
}

/// The URL of a started target, once it listens: the port the forwarder prints, or the one in
/// a Sluice's config once it answers.
async fn url_of(
    env: &Env,
    t: Target,
    p: &mut Proc,
    c: &HttpClient,
    tag: &str,
) -> Result<String, String> {
    match t {
        Target::Forwarder => Ok(format!(
            "http://127.0.0.1:{}/mcp",
            p.line("LISTENING", Duration::from_secs(60))?
        )),
        Target::Sluice | Target::SluiceProd => {
            let cfg = std::fs::read_to_string(env.dir.join(format!("{}-{tag}.toml", t.name())))
                .map_err(|e| e.to_string())?;
            let port = cfg
                .split('"')
                .nth(1)
                .and_then(|a| a.rsplit(':').next())
                .unwrap_or("0")
                .to_owned();
            procs::wait_ready(
                c,
                &format!("http://127.0.0.1:{port}"),
                Duration::from_secs(60),
            )
            .await?;
            Ok(format!("http://127.0.0.1:{port}/mcp"))
        }
    }
}

fn stop(p: &mut Proc, t: Target) -> bool {
    match t {
        Target::Forwarder => p.close_stdin(Duration::from_secs(60)),
        Target::Sluice | Target::SluiceProd => p.terminate(Duration::from_secs(60)),
    }
}

fn tool(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Turns callgrind's counting on or off in process `pid` (`callgrind_control -i`).
fn instrument(pid: u32, on: &str) -> Result<(), String> {
    let out = Command::new("callgrind_control")
        .args(["-i", on, &pid.to_string()])
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control -i {on} {pid}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Instructions per call (callgrind) of the forwarder and both Sluices.
async fn instructions(
    env: &Env,
    o: &Opts,
    c: &HttpClient,
    upstreams: &[String],
    md: &mut String,
) -> Result<(), String> {
    let warm = (o.requests / 10).max(50);
    let mut per_request = Vec::new();
    if Command::new("valgrind").arg("--version").output().is_ok() {
        for t in [Target::Forwarder, Target::Sluice, Target::SluiceProd] {
            let out = o.dir.join(format!("callgrind-{}.out", t.name()));
            let wrapper: Vec<String> = vec![
                "valgrind".into(),
                "--tool=callgrind".into(),
                "--instr-atstart=no".into(),
                format!("--callgrind-out-file={}", out.display()),
            ];
            eprintln!(
                "callgrind: {} for {} calls after {warm}",
                t.name(),
                o.requests
            );
            let (mut p, url) = start(env, o, t, upstreams, &wrapper, c, "cg").await?;
            drive(c, &url, warm, t).await?;
            // Counted from here: start-up (a clock's calibration, first connections) is not.
            instrument(p.pid(), "on")?;
            drive(c, &url, o.requests, t).await?;
            instrument(p.pid(), "off")?;
            if !stop(&mut p, t) {
                return Err(format!("{} under valgrind did not exit", t.name()));
            }
            let per = callgrind_total(&out)? as f64 / o.requests as f64;
            per_request.push((t, per));
            let big = out.display().to_string();
            for (kind, flag) in [("inclusive", "--inclusive=yes"), ("self", "--inclusive=no")] {
                if let Some(text) = tool("callgrind_annotate", &[flag, "--threshold=99", &big]) {
                    let _ = std::fs::write(
                        o.dir.join(format!("annotate-{}-{kind}.txt", t.name())),
                        text,
                    );
                }
            }
        }
        let _ = writeln!(
            md,
            "#### Instructions per call (callgrind; {} calls after {warm}, one connection)\n",
            o.requests
        );
        let _ = writeln!(md, "| target | instructions per call |\n|---|---|");
        for (t, per) in &per_request {
            let _ = writeln!(md, "| {} | {:.0} |", t.name(), per);
        }
        if let [(_, f), (_, s), (_, p)] = per_request.as_slice() {
            let _ = writeln!(
                md,
                "\nSluice plain / forwarder: {:.2}× the instructions, {:+.0} per call; production-like / forwarder: {:.2}×, {:+.0} per call.\n",
                s / f,
                s - f,
                p / f,
                p - f
            );
        }
        let _ = writeln!(
            md,
            "Annotations: `{}/annotate-<target>-<inclusive|self>.txt`.\n",
            o.dir.display()
        );
    } else {
        let _ = writeln!(md, "valgrind not found: no instruction counts.\n");
    }

    Ok(())
}

/// Runs the profile; writes `<dir>/profile.md`.
pub(crate) async fn run(o: Opts) -> Result<(), String> {
    std::fs::create_dir_all(&o.dir).map_err(|e| e.to_string())?;
    let env = Env {
        dir: o.dir.clone(),
        pid_file: o.pid_file.clone(),
    };
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let c = procs::client();
    let mut mock = env.spawn(
        "modern-upstream",
        &me,
        &[
            "modern-upstream",
            "--name",
            "alpha",
            "--name",
            "beta",
            "--parent-stdin",
        ]
        .map(String::from),
        &[],
        true,
    )?;
    let ports = mock.line("LISTENING", Duration::from_secs(10))?;
    let upstreams: Vec<String> = ports
        .split_whitespace()
        .map(|p| format!("http://127.0.0.1:{p}/mcp"))
        .collect();
    let mut md = String::new();

    if o.bridge_only {
        round::run(&env, &o, &c, &upstreams, &mut md).await?;
    } else {
        instructions(&env, &o, &c, &upstreams, &mut md).await?;
    }
    if !o.instructions_only && !o.bridge_only {
        round::run(&env, &o, &c, &upstreams, &mut md).await?;
        heap::parked_heap(&env, &o, &c, &mut md).await?;
        perf::sampled(&env, &o, &c, &upstreams, &mut md).await?;
    }
    let _ = mock.close_stdin(Duration::from_secs(5));
    println!("{md}");
    std::fs::write(o.dir.join("profile.md"), &md).map_err(|e| e.to_string())?;
    Ok(())
}
