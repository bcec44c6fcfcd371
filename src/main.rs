//! The `sluice` command: `serve`, `check`, `demo`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use sluice::config::{Config, Overrides};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "An MCP gateway: one stateless 2026-07-28 endpoint in front of many MCP servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone, Default)]
struct Quick {
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<String>,
    /// An upstream as NAME=URL; repeat for several.
    #[arg(long = "upstream", value_name = "NAME=URL")]
    upstreams: Vec<String>,
    /// An environment variable for the stdio --upstream servers: NAME=VALUE, or NAME alone to
    /// copy Sluice's; UPSTREAM:NAME[=VALUE] gives it to that one only; repeat for several.
    #[arg(long = "env", value_name = "[UPSTREAM:]NAME[=VALUE]")]
    env: Vec<String>,
    /// Publish upstream names without the `<upstream>__` prefix.
    #[arg(long)]
    no_prefix: bool,
    /// A policy file (see policies/); repeat for several, in order.
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<String>,
}

impl Quick {
    fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen.clone(),
            upstreams: self.upstreams.clone(),
            env: self.env.clone(),
            no_prefix: self.no_prefix,
            policies: self.policies.clone(),
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        /// TOML config file.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        quick: Quick,
    },
    /// Validate a config: a verdict line first (`ok: …` or `refused: …`), warnings, then the
    /// effective config, secrets redacted; with `--principal`, probe the upstreams and print
    /// what that principal would see and what each tool call does instead.
    Check {
        /// TOML config file.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        quick: Quick,
        /// Print what this principal would see of each list, which rule decides each item, and
        /// each tool's fate (hidden, denied, needs approval, allowed; its quota). Connects to
        /// the upstreams (stdio servers are started) to list their tools.
        #[arg(long)]
        principal: Option<String>,
        /// The principal's groups (repeat; default: its API key's groups, if a key names it).
        #[arg(long = "group", value_name = "GROUP", requires = "principal")]
        groups: Vec<String>,
    },
    /// The tokens Sluice holds for principals at `oauth` upstreams (`[cluster]` only: they
    /// are in Redis, sealed under the state keys): list them (never a token) or revoke them.
    Tokens {
        #[command(subcommand)]
        action: Tokens,
    },
    /// Tool pins (`[pins]`): list them, or accept a quarantined tool's changed definition so
    /// it is served again (docs/pins.md).
    Pins {
        #[command(subcommand)]
        action: Pins,
    },
    /// Print the JSON Schema of a config file, every key documented (for an editor's TOML
    /// completion; docs/configuration-reference.md is made from it).
    Schema,
    /// Print the SHA-256 of an API key, for `[[auth.api_keys]] sha256 = "…"`.
    HashKey {
        /// The API key.
        key: String,
    },
    /// The demo's stdio upstream: a 2025-11-25 MCP server on stdin/stdout (`sluice demo` runs it).
    #[command(hide = true)]
    DemoStdioServer,
    /// Start Sluice on loopback in front of built-in demo upstreams.
    Demo {
        /// Also run a scripted client that prints and checks each step, then exit.
        #[arg(long)]
        walkthrough: bool,
        /// Address to listen on (default: a free loopback port).
        #[arg(long)]
        listen: Option<String>,
    },
}

#[derive(Subcommand)]
enum Tokens {
    /// One line per token held: principal, upstream, expiry, refreshable, scopes, issuer.
    List {
        /// TOML config file (its [state] keys and [cluster]).
        #[arg(long)]
        config: PathBuf,
        /// Only this principal's.
        #[arg(long)]
        principal: Option<String>,
        /// Only those for this upstream.
        #[arg(long)]
        upstream: Option<String>,
    },
    /// Drop a principal's tokens (at one upstream, or all): their next call asks them to sign
    /// in again; every replica stops using them within 2 s.
    Revoke {
        /// TOML config file (its [state] keys and [cluster]).
        #[arg(long)]
        config: PathBuf,
        /// Whose tokens.
        #[arg(long)]
        principal: String,
        /// Only the one for this upstream.
        #[arg(long)]
        upstream: Option<String>,
    },
    /// End a principal's sign-ins through `[auth.login]` (`[cluster]` only): their refresh
    /// tokens are refused at once on every replica; access tokens last until they expire.
    RevokeSignIns {
        /// TOML config file (its [cluster] and [auth.login]).
        #[arg(long)]
        config: PathBuf,
        /// Whose sign-ins.
        #[arg(long)]
        principal: String,
    },
}

#[derive(Subcommand)]
enum Pins {
    /// One line per pin: upstream, tool, status, reason, pinned and pending digests, since when.
    List {
        /// TOML config file (its [pins] file, or its [cluster]).
        #[arg(long)]
        config: PathBuf,
    },
    /// Accept a quarantined tool's definition (or every one of an upstream's, with --all): it
    /// is pinned, and a running Sluice serves the tool again at its next refresh of the list.
    Accept {
        /// TOML config file (its [pins] file, or its [cluster]).
        #[arg(long)]
        config: PathBuf,
        /// The upstream.
        #[arg(long)]
        upstream: String,
        /// The tool (its upstream's own name, unprefixed).
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        tool: Option<String>,
        /// Every quarantined tool of the upstream.
        #[arg(long)]
        all: bool,
    },
}

/// `sluice pins`: reads the config, then lists or accepts.
async fn pins(action: Pins) -> anyhow::Result<std::process::ExitCode> {
    let no = Overrides::default();
    let out = match action {
        Pins::List { config } => {
            let cfg = Config::load(Some(&config), &no)?;
            sluice::pins::cli::list(&cfg).await
        }
        Pins::Accept {
            config,
            upstream,
            tool,
            all: _,
        } => {
            let cfg = Config::load(Some(&config), &no)?;
            sluice::pins::cli::accept(&cfg, &upstream, tool.as_deref()).await
        }
    };
    print!("{}", out.map_err(anyhow::Error::msg)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// `sluice tokens`: reads the config, then lists or revokes in the vault.
async fn tokens(action: Tokens) -> anyhow::Result<std::process::ExitCode> {
    let no = Overrides::default();
    let out = match action {
        Tokens::List {
            config,
            principal,
            upstream,
        } => {
            let cfg = Config::load(Some(&config), &no)?;
            sluice::tokens::list(&cfg, principal.as_deref(), upstream.as_deref()).await
        }
        Tokens::Revoke {
            config,
            principal,
            upstream,
        } => {
            let cfg = Config::load(Some(&config), &no)?;
            sluice::tokens::revoke(&cfg, &principal, upstream.as_deref()).await
        }
        Tokens::RevokeSignIns { config, principal } => {
            let cfg = Config::load(Some(&config), &no)?;
            sluice::tokens::revoke_sign_ins(&cfg, &principal).await
        }
    };
    print!("{}", out.map_err(anyhow::Error::msg)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// mimalloc: per-thread free lists, so the many small allocations of a request (header values,
/// label strings, body buffers) cost a fraction of glibc malloc's (docs/benchmarks.md). The
/// `system-alloc` feature leaves it out, for heap profiles.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // First, while Sluice has one thread and no child: no process it starts may read its memory
    // or environment, and every orphan one leaves is handed to Sluice to end (docs/security.md).
    if let Err(e) = sluice::upstream::stdio::boundary::harden() {
        eprintln!("sluice: {e}");
        return std::process::ExitCode::from(2);
    }
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(start()),
        Err(e) => {
            eprintln!("sluice: cannot start the async runtime: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn start() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn run(cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    // `serve` sets up logging once its config (and its `[telemetry]`) is read; `check`'s log
    // lines go through the redaction its output does, and the state keys' startup warning is
    // for `serve`'s log (`check` says where the keys matter itself).
    match cmd {
        Command::Serve { .. } => {}
        Command::Check { .. } => sluice::telemetry::init_check("warn,sluice::state=error"),
        _ => {
            sluice::telemetry::init("info", None).map_err(anyhow::Error::msg)?;
        }
    }
    match cmd {
        Command::Serve { config, quick } => serve(config, quick).await,
        Command::Check {
            config,
            quick,
            principal,
            groups,
        } => check(config, quick, principal, groups).await,
        Command::Tokens { action } => tokens(action).await,
        Command::Pins { action } => pins(action).await,
        Command::Schema => {
            println!("{:#}", sluice::config::schema());
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::HashKey { key } => {
            println!("{}", sluice::auth::api_keys::hash_key(&key));
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::DemoStdioServer => {
            sluice_demo::stdio::serve().await?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Demo {
            walkthrough,
            listen,
        } => sluice_demo::run(walkthrough, listen)
            .await
            .map_err(anyhow::Error::msg),
    }
}

/// `sluice serve`: loads the config, binds its listener and serves until a shutdown signal
/// (reading the config again, from the same file and flags, on SIGHUP).
async fn serve(config: Option<PathBuf>, quick: Quick) -> anyhow::Result<std::process::ExitCode> {
    let cfg = Config::load(config.as_deref(), &quick.overrides())?;
    let otel =
        sluice::telemetry::init("info", cfg.telemetry.as_ref()).map_err(anyhow::Error::msg)?;
    if cfg.upstreams.is_empty() {
        anyhow::bail!("no upstreams: add [[upstream]] to the config or pass --upstream NAME=URL");
    }
    let listener = sluice::server::bind(cfg.listen)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.listen))?;
    // With port 0 in the config, log (and use) the port actually bound.
    let mut cfg = cfg;
    cfg.listen = listener.local_addr().unwrap_or(cfg.listen);
    let gw = sluice::gateway::Generation::new(cfg).map_err(anyhow::Error::msg)?;
    // Read again, from the same file and flags, on SIGHUP.
    let _ = gw.rt.live.source.set(sluice::config::Source {
        path: config,
        overrides: quick.overrides(),
    });
    sluice::internal::start(&gw).map_err(anyhow::Error::msg)?;
    sluice::admin::start(&gw).map_err(anyhow::Error::msg)?;
    tracing::info!(addr = %gw.cfg.listen, path = %gw.cfg.path, upstreams = gw.catalog.upstreams.len(), "sluice listening");
    sluice::server::run(listener, gw, sluice::shutdown::signal()).await;
    if let Some(otel) = otel {
        otel.shutdown().await;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `sluice check`: prints the verdict, warnings and effective config (with `--principal`, what
/// that principal would see); exit status 2 when refused.
async fn check(
    config: Option<PathBuf>,
    quick: Quick,
    principal: Option<String>,
    groups: Vec<String>,
) -> anyhow::Result<std::process::ExitCode> {
    // Exactly what `serve` reads before it listens, and a reload before it applies:
    // upstreams, credentials, keys, policies, files. The verdict comes first.
    let checked = sluice::inspect::check(
        config.as_deref(),
        &quick.overrides(),
        principal.as_deref(),
        &groups,
    )
    .await;
    print!("{}", checked.text);
    match checked.refused {
        Some(e) => {
            eprintln!("sluice: {e}");
            Ok(std::process::ExitCode::from(2))
        }
        None => Ok(std::process::ExitCode::SUCCESS),
    }
}
