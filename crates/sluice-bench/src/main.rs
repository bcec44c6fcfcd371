//! `sluice-bench`: Sluice's benchmark (issue 7), one binary holding every peer it needs.
//!
//! `run` measures everything in one go, alternating the paths, and writes the table
//! (docs/benchmarks.md explains each figure); `profile` counts instructions per request with
//! callgrind and samples a loaded Sluice with `perf` where it works. The other subcommands are
//! the processes `run` starts: a fast modern mock upstream, a fast legacy mock upstream, a
//! 2025-11-25 stdio server (Sluice starts it), a do-nothing forwarder built like Sluice, and a
//! connection holder (the memory baseline).
//! Started with `--parent-stdin`, a peer exits when its stdin closes, so no peer outlives `run`.
//!
//! Usage: `bash scripts/bench.sh` (installs wrk, builds, runs this, writes target/bench/results.md).

mod bridge;
mod forwarder;
mod memory;
mod micro;
mod procs;
mod profile;
mod run;
mod wire;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice_testkit::fast::{http as mocks, stdio as stdio_mock};

#[derive(Parser)]
#[command(
    name = "sluice-bench",
    about = "Sluice's benchmark: direct vs a do-nothing forwarder vs Sluice, bridge A, micro, memory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure everything and write the table (markdown) to stdout and --out.
    Run(run::Opts),
    /// Instruction counts per request (callgrind) and a sampled profile (perf) of Sluice and the forwarder.
    Profile(profile::Opts),
    /// Only the micro benchmarks (whose names contain --only, when given), as a table.
    Micro {
        /// Run only the micro benchmarks whose name contains this.
        #[arg(long)]
        only: Option<String>,
        /// Milliseconds per batch (5 batches).
        #[arg(long, default_value_t = 300)]
        batch_ms: u64,
    },
    /// A fast 2026-07-28 upstream answering from memory; one listener per --name; prints `LISTENING <port>...`.
    ModernUpstream {
        /// Upstream names (each gets its own port).
        #[arg(long = "name", default_values_t = vec!["alpha".to_owned()])]
        names: Vec<String>,
        /// Exit when stdin closes.
        #[arg(long)]
        parent_stdin: bool,
    },
    /// A fast 2025-11-25 upstream whose `sample` tool asks one sampling/createMessage; prints `LISTENING <port>`.
    LegacyUpstream {
        /// HTTP/2 only (prior knowledge), any number of streams at once.
        #[arg(long)]
        http2: bool,
        /// Exit when stdin closes.
        #[arg(long)]
        parent_stdin: bool,
    },
    /// A 2025-11-25 stdio server with `echo` on stdin/stdout (Sluice starts it as a child process).
    StdioUpstream,
    /// A do-nothing forwarder built like Sluice (same server builder, pooled client, runtime); prints `LISTENING <port>`.
    Forwarder {
        /// The upstream URL every request is sent to.
        #[arg(long)]
        to: String,
        /// Exit when stdin closes.
        #[arg(long)]
        parent_stdin: bool,
    },
    /// Holds N legacy sessions' GET streams and N call streams, as N parked exchanges do, and
    /// prints `HOLD <rss_kib_before> <rss_kib_after> <n>` (the connections-only memory baseline).
    Hold {
        /// The legacy upstream URL.
        #[arg(long)]
        url: String,
        /// How many exchanges' connections to hold.
        #[arg(long)]
        n: usize,
        /// Over HTTP/2 (prior knowledge): streams of one connection.
        #[arg(long)]
        http2: bool,
        /// Exit when stdin closes.
        #[arg(long)]
        parent_stdin: bool,
    },
}

/// mimalloc: per-thread free lists, so the many small allocations of a request (header values,
/// label strings, body buffers) cost a fraction of glibc malloc's (docs/benchmarks.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(o) => run::run(o).await,
        Command::Profile(o) => profile::run(o).await,
        Command::Micro { only, batch_ms } => micro::run(
            5,
            std::time::Duration::from_millis(batch_ms),
            only.as_deref(),
        )
        .map(|ms| {
            for m in ms {
                println!(
                    "{:<28} {:>8.0} ns/op ({:.0}–{:.0})",
                    m.name, m.ns.0, m.ns.1, m.ns.2
                );
            }
        }),
        Command::ModernUpstream {
            names,
            parent_stdin,
        } => {
            exit_with_parent(parent_stdin);
            mocks::modern(names).await
        }
        Command::LegacyUpstream {
            http2,
            parent_stdin,
        } => {
            exit_with_parent(parent_stdin);
            mocks::legacy(http2).await
        }
        Command::StdioUpstream => stdio_mock::serve().await,
        Command::Forwarder { to, parent_stdin } => {
            exit_with_parent(parent_stdin);
            forwarder::serve(&to).await
        }
        Command::Hold {
            url,
            n,
            http2,
            parent_stdin,
        } => {
            exit_with_parent(parent_stdin);
            memory::hold(&url, n, http2).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// With `on`, exits the process when stdin reaches its end (the parent went away).
fn exit_with_parent(on: bool) {
    if on {
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            std::process::exit(0);
        });
    }
}
