//! The HTTP paths of `run` (direct, forwarder, Sluice plain, production-like and with its
//! defaults, a peer gateway when given, and the `[cluster]` rows when Redis and HAProxy are here),
//! measured with wrk: throughput at 16 connections, then latency at 1, the paths rotated every
//! run. Takes the run's [`Bench`]; gives the wrk runs and the Sluices' memory around them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;
use sluice::upstream::client::HttpClient;

use super::Bench;
use crate::procs::{self, rss_kib, Env, Proc};
use crate::wire::{self, WrkRun};

/// What the HTTP part measured.
pub(crate) struct Web {
    pub(crate) paths: Vec<Path4>,
    pub(crate) idle_plain: u64,
    pub(crate) idle_prod: u64,
    pub(crate) loaded_plain: u64,
    pub(crate) loaded_prod: u64,
    /// Calls wrk counted as answered by the production-like Sluice (the sanity call included).
    pub(crate) prod_requests: u64,
    /// Records in its audit log.
    pub(crate) audit_records: u64,
    /// Audit records the Sluice with its defaults wrote to stderr.
    pub(crate) defaults_records: u64,
}

/// Audit records (JSON lines naming a method) in a process's log; the log is removed after.
fn count_audit(log: &Path) -> u64 {
    let n = std::fs::File::open(log)
        .map(|f| {
            std::io::BufRead::lines(std::io::BufReader::new(f))
                .map_while(Result::ok)
                .filter(|l| l.starts_with('{') && l.contains("\"method\""))
                .count() as u64
        })
        .unwrap_or(0);
    let _ = std::fs::remove_file(log);
    n
}

/// One HTTP path under test.
pub(crate) struct Path4 {
    pub(crate) label: String,
    pub(crate) url: String,
    pub(crate) script: PathBuf,
    pub(crate) tput: Vec<WrkRun>,
    pub(crate) lat: Vec<WrkRun>,
}

pub(crate) async fn wrk(script: &Path, url: &str, conns: u32, secs: u64) -> Result<WrkRun, String> {
    let args: Vec<String> = vec![
        "-k".into(),
        "5".into(),
        (secs + 30).to_string(),
        "wrk".into(),
        "-t1".into(),
        format!("-c{conns}"),
        format!("-d{secs}s"),
        "--timeout".into(),
        "5s".into(),
        "-s".into(),
        script.display().to_string(),
        url.to_owned(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("timeout").args(&args).output()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("cannot run wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    wire::parse_wrk(&text).ok_or_else(|| {
        format!(
            "wrk printed no result for {url}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// One call through a path, checked: HTTP 200 and the mock's full text back.
pub(crate) async fn sanity(
    c: &HttpClient,
    url: &str,
    name: &str,
    bearer: Option<&str>,
) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
    let body = wire::bytes(wire::tools_call(7, name));
    let v = crate::bridge::post_json(c, &uri, wire::authed_headers(name, bearer), body)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let ok = v["id"] == 7
        && v["result"]["resultType"] == "complete"
        && v["result"]["content"][0]["text"] == wire::arg_text().as_str();
    if ok {
        Ok(())
    } else {
        Err(format!("{url}: unexpected answer {v}"))
    }
}

fn sluice_config(dir: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).map_err(|e| e.to_string())?;
    Ok(p)
}

pub(crate) async fn start_sluice(
    env: &Env,
    bin: &Path,
    name: &str,
    text: String,
    c: &HttpClient,
) -> Result<(Proc, String), String> {
    let port = procs::free_port()?;
    let cfg = sluice_config(
        &env.dir,
        name,
        &format!(
            "listen = \"127.0.0.1:{port}\"\n{}{text}",
            crate::wire::loops()
        ),
    )?;
    let p = env.spawn(
        name,
        bin,
        &["serve".into(), "--config".into(), cfg.display().to_string()],
        &[("RUST_LOG", "info")],
        false,
    )?;
    let base = format!("http://127.0.0.1:{port}");
    procs::wait_ready(c, &base, Duration::from_secs(20)).await?;
    Ok((p, format!("{base}/mcp")))
}

fn first_port(s: &str) -> Result<Vec<u16>, String> {
    s.split_whitespace()
        .map(|p| p.parse::<u16>().map_err(|e| e.to_string()))
        .collect()
}

/// The production-like config: two upstreams federated behind API-key authentication, the audit
/// log on (to a file), the default policy (no policy file, default budgets).
fn prod_config(audit_file: &Path, alpha: &str, beta: &str) -> String {
    format!(
        "\n[audit]\nsink = \"{}\"\n\n[[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"bench\"\n\n[[upstream]]\nname = \"alpha\"\nurl = \"{alpha}\"\n\n[[upstream]]\nname = \"beta\"\nurl = \"{beta}\"\n",
        audit_file.display(),
        sluice::auth::api_keys::hash_key(wire::API_KEY)
    )
}

/// Starts the mock, the forwarder, the Sluices and any peer gateway, measures the paths, stops them.
pub(crate) async fn measure(b: &Bench<'_>) -> Result<Web, String> {
    let (env, me, c, o) = (&b.env, &b.me, &b.c, b.o);
    b.log("starting the modern mock upstream, the forwarder and two Sluices");
    let (mock, alpha, beta) = start_mock(env, me)?;
    let (fwd, fwd_url) = start_forwarder(env, me, &alpha)?;
    let audit_file = o.dir.join("audit-prod.log");
    let _ = std::fs::remove_file(&audit_file);
    let (plain, plain_url) =
        start_sluice(env, &o.sluice, "sluice-plain", plain_config(&alpha), c).await?;
    let (prod, prod_url) = start_sluice(
        env,
        &o.sluice,
        "sluice-prod",
        prod_config(&audit_file, &alpha, &beta),
        c,
    )
    .await?;
    let (defaults, defaults_url) = start_sluice(
        env,
        &o.sluice,
        "sluice-defaults",
        defaults_config(&alpha),
        c,
    )
    .await?;
    let idle_plain = rss_kib(plain.pid()).unwrap_or(0);
    let idle_prod = rss_kib(prod.pid()).unwrap_or(0);

    let urls = [&alpha, &fwd_url, &plain_url, &prod_url, &defaults_url];
    let mut paths = base_paths(c, &o.dir, urls).await?;
    let peer = match &o.mcp_proxy {
        Some(bin) => Some(super::peer::start(b, bin, &alpha, &mut paths).await?),
        None => None,
    };
    let cluster =
        super::cluster::start(b, &|audit| prod_config(audit, &alpha, &beta), &mut paths).await?;
    let warm_prod = rotate(b, &mut paths).await?;
    let loaded_plain = rss_kib(plain.pid()).unwrap_or(0);
    let loaded_prod = rss_kib(prod.pid()).unwrap_or(0);
    // SIGTERM first: a Sluice writes its queued audit records before it exits, so the counts
    // below are what it wrote, not what a kill left.
    let (mut prod, mut defaults) = (prod, defaults);
    for p in [&mut prod, &mut defaults] {
        if !p.terminate(Duration::from_secs(10)) {
            b.log("warning: a Sluice did not exit within 10 s of SIGTERM; its audit count may be short");
        }
    }
    drop((plain, prod, defaults, fwd, peer, cluster, mock));
    for n in ["cluster", "c1", "c2"] {
        let _ = std::fs::remove_file(o.dir.join(format!("audit-{n}.log")));
    }
    let defaults_records = count_audit(&o.dir.join("sluice-defaults.log"));
    // The audit log proves it was on; it is large, so only its record count is kept.
    let prod_requests = prod_requests(warm_prod, &paths[3]);
    let audit_records = count_lines(&audit_file);
    Ok(Web {
        paths,
        idle_plain,
        idle_prod,
        loaded_plain,
        loaded_prod,
        prod_requests,
        audit_records,
        defaults_records,
    })
}

/// Starts the modern mock with two servers, `alpha` and `beta`; gives it and their URLs.
fn start_mock(env: &Env, me: &Path) -> Result<(Proc, String, String), String> {
    let mut mock = env.spawn(
        "modern-upstream",
        me,
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
    let ports = first_port(&mock.line("LISTENING", Duration::from_secs(10))?)?;
    let (alpha, beta) = (
        format!("http://127.0.0.1:{}/mcp", ports[0]),
        format!("http://127.0.0.1:{}/mcp", ports[1]),
    );
    Ok((mock, alpha, beta))
}

/// Starts the do-nothing forwarder in front of `alpha`; gives it and its URL.
fn start_forwarder(env: &Env, me: &Path, alpha: &str) -> Result<(Proc, String), String> {
    let mut fwd = env.spawn(
        "forwarder",
        me,
        &[
            "forwarder".into(),
            "--to".into(),
            alpha.to_owned(),
            "--parent-stdin".into(),
        ],
        &[],
        true,
    )?;
    let fwd_url = format!(
        "http://127.0.0.1:{}/mcp",
        fwd.line("LISTENING", Duration::from_secs(10))?
    );
    Ok((fwd, fwd_url))
}

/// Plain: one upstream, no authentication, no audit log (the default policy applies).
fn plain_config(alpha: &str) -> String {
    format!("\n[audit]\nenabled = false\n\n[[upstream]]\nname = \"alpha\"\nurl = \"{alpha}\"\n")
}

/// Defaults: nothing but the upstream, so the audit log is on and goes to stderr (its log file).
fn defaults_config(alpha: &str) -> String {
    format!("\n[[upstream]]\nname = \"alpha\"\nurl = \"{alpha}\"\n")
}

/// The paths every run measures, in this order: the mock, the forwarder, and the plain,
/// production-like and defaults Sluices at `urls`.
async fn base_paths(c: &HttpClient, dir: &Path, urls: [&String; 5]) -> Result<Vec<Path4>, String> {
    let [alpha, fwd, plain, prod, defaults] = urls;
    let mut paths = Vec::new();
    for (label, url, name, bearer) in [
        ("direct to the mock upstream", alpha, "echo", None),
        ("do-nothing forwarder", fwd, "echo", None),
        ("Sluice plain (one upstream, no auth)", plain, "echo", None),
        (
            "Sluice production-like (two upstreams federated, API-key auth)",
            prod,
            "alpha__echo",
            Some(wire::API_KEY),
        ),
        (
            "Sluice with its defaults (one upstream, audit log to stderr)",
            defaults,
            "echo",
            None,
        ),
    ] {
        add_path(c, dir, &mut paths, label, url.clone(), name, bearer).await?;
    }
    Ok(paths)
}

/// Checks one call through `url` ([`sanity`]), writes its wrk script (`<dir>/call-<n>.lua`)
/// and adds it to `paths`.
pub(crate) async fn add_path(
    c: &HttpClient,
    dir: &Path,
    paths: &mut Vec<Path4>,
    label: &str,
    url: String,
    name: &str,
    bearer: Option<&str>,
) -> Result<(), String> {
    sanity(c, &url, name, bearer).await?;
    let script = dir.join(format!("call-{}.lua", paths.len()));
    std::fs::write(&script, wire::wrk_script(name, bearer)).map_err(|e| e.to_string())?;
    paths.push(Path4 {
        label: label.to_owned(),
        url,
        script,
        tput: Vec::new(),
        lat: Vec::new(),
    });
    Ok(())
}

/// Calls answered by the production-like Sluice: those wrk counted on its path, warm-up
/// included, and the sanity call.
fn prod_requests(warm_prod: u64, prod: &Path4) -> u64 {
    1 + warm_prod
        + prod
            .tput
            .iter()
            .chain(prod.lat.iter())
            .map(|w| w.requests)
            .sum::<u64>()
}

/// Lines in a log (the production-like Sluice's audit log: one record a line); the log is
/// removed after.
fn count_lines(log: &Path) -> u64 {
    let n = std::fs::File::open(log)
        .map(|f| std::io::BufRead::lines(std::io::BufReader::new(f)).count() as u64)
        .unwrap_or(0);
    let _ = std::fs::remove_file(log);
    n
}

/// A warm-up of each path, then the runs, rotated; gives the production-like warm-up's count.
async fn rotate(b: &Bench<'_>, paths: &mut [Path4]) -> Result<u64, String> {
    b.log("warm-up (1 s per path)");
    let mut warm_requests = Vec::new();
    for p in paths.iter() {
        warm_requests.push(wrk(&p.script, &p.url, 16, 1).await?.requests);
    }
    let n = paths.len();
    for (conns, what) in [
        (16u32, "throughput, 16 connections"),
        (1, "latency, 1 connection"),
    ] {
        for r in 0..b.plan.runs {
            b.log(&format!(
                "{what}: run {}/{} ({} s per path)",
                r + 1,
                b.plan.runs,
                b.plan.secs
            ));
            for k in 0..n {
                let p = &mut paths[(k + r) % n];
                let w = wrk(&p.script, &p.url, conns, b.plan.secs).await?;
                if w.errors > 0 {
                    b.log(&format!("warning: {} errors on {}", w.errors, p.label));
                }
                if conns == 16 { &mut p.tput } else { &mut p.lat }.push(w);
            }
        }
    }
    Ok(warm_requests[3])
}
