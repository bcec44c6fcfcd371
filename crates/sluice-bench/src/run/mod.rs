//! `sluice-bench run`: every measurement of issues 7 and 14 in one run, and the table.
//!
//! Order: micro benchmarks (in this process, before any peer runs); the HTTP paths (direct,
//! forwarder, Sluice plain, production-like and with its defaults, and `mcp-proxy` when given)
//! with wrk, throughput at 16 connections then latency at 1 connection, the paths rotated every
//! run so drift in the machine's load spreads over all of them; then bridge A (direct and
//! through Sluice, in alternating chunks); then memory (idle RSS, parked exchanges, the
//! connections-only baseline); then the scale figures (a stdio server's processes among them). Every peer is a process of its own,
//! stopped as soon as its part is done.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::procs::{self, Env};

pub(crate) mod bridge_a;
mod cluster;
mod http;
mod peer;
mod report;
mod report_scale;
mod scale;
mod sessions;
mod stdio;

/// Options of `run`.
#[derive(clap::Args, Debug)]
pub(crate) struct Opts {
    /// CI smoke mode: one short run of everything (under 60 s once built); reports, never judges.
    #[arg(long)]
    smoke: bool,
    /// Runs per path and measure (medians and spreads are over these). Default 5 (smoke: 1).
    #[arg(long)]
    runs: Option<usize>,
    /// Seconds per wrk run. Default 5 (smoke: 1).
    #[arg(long)]
    secs: Option<u64>,
    /// Exchanges parked for the memory figure. Default 2000 (smoke: 200).
    #[arg(long)]
    parked: Option<usize>,
    /// Bridge A rounds measured per side. Default 500 (smoke: 50).
    #[arg(long)]
    rounds: Option<usize>,
    /// The sluice binary to measure.
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Working directory: configs, logs, wrk scripts, results.
    #[arg(long, default_value = "target/bench")]
    dir: PathBuf,
    /// A file to append the pid of every started process to (the calling script stops them).
    #[arg(long)]
    pid_file: Option<PathBuf>,
    /// The markdown output (default <dir>/results.md).
    #[arg(long)]
    out: Option<PathBuf>,
    /// An `mcp-proxy` binary (crates.io `mcp-proxy`, built with `protocol-2026-07-28`) measured
    /// in front of the same mock as a comparison row; `scripts/bench.sh` installs it.
    #[arg(long)]
    mcp_proxy: Option<PathBuf>,
    /// Skip the scale figures (federation, parked exchanges, sessions, connections).
    #[arg(long)]
    no_scale: bool,
}

pub(crate) struct Plan {
    pub(crate) runs: usize,
    pub(crate) secs: u64,
    pub(crate) parked: usize,
    pub(crate) rounds: usize,
    pub(crate) micro_batches: usize,
    pub(crate) micro_batch: Duration,
}

impl Plan {
    fn of(o: &Opts) -> Plan {
        let (runs, secs, parked, rounds, batch) = if o.smoke {
            (1, 1, 200, 50, 50)
        } else {
            (5, 5, 2000, 500, 300)
        };
        Plan {
            runs: o.runs.unwrap_or(runs).max(1),
            secs: o.secs.unwrap_or(secs).max(1),
            parked: o.parked.unwrap_or(parked).max(1),
            rounds: o.rounds.unwrap_or(rounds).max(5),
            micro_batches: if o.smoke { 3 } else { 5 },
            micro_batch: Duration::from_millis(batch),
        }
    }
}

/// What every part of the run needs: options, plan, where processes go, this binary, a client.
pub(crate) struct Bench<'a> {
    pub(crate) o: &'a Opts,
    pub(crate) plan: &'a Plan,
    pub(crate) env: Env,
    pub(crate) me: PathBuf,
    pub(crate) c: sluice::upstream::client::HttpClient,
    pub(crate) started: Instant,
}

impl Bench<'_> {
    pub(crate) fn log(&self, m: &str) {
        eprintln!("[{:>5.1}s] {m}", self.started.elapsed().as_secs_f64());
    }
}

/// Runs everything; prints and writes the markdown.
pub(crate) async fn run(o: Opts) -> Result<(), String> {
    let plan = Plan::of(&o);
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("{}: {e}", o.dir.display()))?;
    let b = Bench {
        o: &o,
        plan: &plan,
        env: Env {
            dir: o.dir.clone(),
            pid_file: o.pid_file.clone(),
        },
        me: std::env::current_exe().map_err(|e| e.to_string())?,
        c: procs::client(),
        started: Instant::now(),
    };
    let load_before = report::loadavg();

    // 1. Micro, before any peer runs.
    b.log("micro benchmarks");
    let micro = crate::micro::run(plan.micro_batches, plan.micro_batch, None)?;
    // 2. The four HTTP paths; 3. bridge A and 4. memory.
    let web = http::measure(&b).await?;
    let bridge = bridge_a::measure(&b).await?;
    // 5. Scale: federation, parked exchanges, client sessions, idle connections.
    let scale = if o.no_scale {
        scale::Scale::default()
    } else {
        scale::measure(&b).await?
    };
    // 6. The table.
    let md = report::render(&b, &load_before, &web, &bridge, &scale, &micro);
    println!("{md}");
    let out = o.out.clone().unwrap_or_else(|| o.dir.join("results.md"));
    std::fs::write(&out, &md).map_err(|e| format!("{}: {e}", out.display()))?;
    b.log(&format!("wrote {}", out.display()));
    Ok(())
}
