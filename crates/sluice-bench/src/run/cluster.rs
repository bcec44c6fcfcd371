//! The `[cluster]` rows (issue 13): the production-like Sluice with Redis added, and two such
//! replicas behind HAProxy round robin (`deploy/haproxy.cfg`), driven by the same wrk call.
//! Takes the mock's two URLs; gives the processes (held until the runs end) and adds their
//! paths. Refuses nothing: without `redis-server` or `haproxy` on the machine it adds no row and
//! says so (`scripts/bench.sh` installs both on a full run).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::http::{add_path, start_sluice, Path4};
use super::Bench;
use crate::procs::{self, Proc};
use crate::wire;

const HAPROXY_CFG: &str = include_str!("../../../../deploy/haproxy.cfg");

/// The processes behind the rows; dropped after the runs.
pub(crate) struct Held {
    _procs: Vec<Proc>,
}

fn found(bin: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"]
        .iter()
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.exists())
}

/// The production-like config with `[cluster]` on the bench's Redis.
fn config(base: &str, id: &str, redis: &str) -> String {
    let key = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode([7u8; 32])
    };
    format!("{base}\n[state]\nkeys = [\"1:{key}\"]\n\n[cluster]\nredis_url = \"{redis}\"\nid = \"{id}\"\nlisten = \"127.0.0.1:0\"\n")
}

/// Starts Redis, one clustered Sluice, two more behind HAProxy; adds the two rows.
pub(crate) async fn start(
    b: &Bench<'_>,
    prod: &dyn Fn(&Path) -> String,
    paths: &mut Vec<Path4>,
) -> Result<Option<Held>, String> {
    let (Some(redis_bin), Some(haproxy_bin)) = (found("redis-server"), found("haproxy")) else {
        b.log("no redis-server or haproxy here: the [cluster] rows are left out (apt-get install redis-server haproxy)");
        return Ok(None);
    };
    b.log("starting Redis, a clustered Sluice, and two replicas behind HAProxy");
    let (redis, url) = start_redis(b, &redis_bin)?;
    let mut procs = vec![redis];
    let audit = |n: &str| b.o.dir.join(format!("audit-{n}.log"));
    let (one, one_url) = start_sluice(
        &b.env,
        &b.o.sluice,
        "sluice-cluster",
        config(&prod(&audit("cluster")), "c0", &url),
        &b.c,
    )
    .await?;
    procs.push(one);
    let backends = start_replicas(b, prod, &url, &mut procs).await?;
    let (haproxy, port) = spawn_haproxy(b, &haproxy_bin, &backends)?;
    procs.push(haproxy);
    let lb_url = format!("http://127.0.0.1:{port}/mcp");
    procs::wait_ready(
        &b.c,
        &format!("http://127.0.0.1:{port}"),
        Duration::from_secs(20),
    )
    .await?;
    for (label, url) in [
        ("Sluice production-like + [cluster] (Redis)", one_url),
        (
            "two production-like + [cluster] replicas behind HAProxy (round robin)",
            lb_url,
        ),
    ] {
        let (name, bearer) = ("alpha__echo", Some(wire::API_KEY));
        add_path(&b.c, &b.o.dir, paths, label, url, name, bearer).await?;
    }
    Ok(Some(Held { _procs: procs }))
}

/// Starts Redis on a Unix socket only, nothing saved; gives it and its URL.
fn start_redis(b: &Bench<'_>, redis_bin: &Path) -> Result<(Proc, String), String> {
    let socket =
        std::env::temp_dir().join(format!("sluice-bench-redis-{}.sock", std::process::id()));
    let args: Vec<String> = [
        "--port",
        "0",
        "--save",
        "",
        "--appendonly",
        "no",
        "--unixsocket",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([socket.display().to_string()])
    .collect();
    let mut redis = b.env.spawn("redis", redis_bin, &args, &[], true)?;
    wait_line(
        &mut redis,
        "ready to accept connections",
        Duration::from_secs(10),
    )?;
    Ok((redis, format!("redis+unix://{}", socket.display())))
}

/// Starts the two clustered replicas `c1` and `c2` on Redis at `redis`, adding them to `procs`;
/// gives their addresses (`host:port`) for HAProxy.
async fn start_replicas(
    b: &Bench<'_>,
    prod: &dyn Fn(&Path) -> String,
    redis: &str,
    procs: &mut Vec<Proc>,
) -> Result<Vec<String>, String> {
    let audit = |n: &str| b.o.dir.join(format!("audit-{n}.log"));
    let mut backends = Vec::new();
    for id in ["c1", "c2"] {
        let (p, u) = start_sluice(
            &b.env,
            &b.o.sluice,
            &format!("sluice-{id}"),
            config(&prod(&audit(id)), id, redis),
            &b.c,
        )
        .await?;
        backends.push(
            u.trim_start_matches("http://")
                .trim_end_matches("/mcp")
                .to_owned(),
        );
        procs.push(p);
    }
    Ok(backends)
}

/// Starts HAProxy with the deployed config on a free port, round robin over `backends`; gives
/// it and the port.
fn spawn_haproxy(
    b: &Bench<'_>,
    haproxy_bin: &Path,
    backends: &[String],
) -> Result<(Proc, u16), String> {
    let port = procs::free_port()?;
    let cfg_path = b.o.dir.join("haproxy.cfg");
    std::fs::write(&cfg_path, haproxy_config(port, backends)).map_err(|e| e.to_string())?;
    let p = b.env.spawn(
        "haproxy",
        haproxy_bin,
        &["-db".into(), "-f".into(), cfg_path.display().to_string()],
        &[],
        false,
    )?;
    Ok((p, port))
}

/// `deploy/haproxy.cfg` bound to `127.0.0.1:<port>`, its servers replaced by `backends`.
fn haproxy_config(port: u16, backends: &[String]) -> String {
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, a)| format!("    server sluice-{} {a}\n", i + 1))
        .collect();
    HAPROXY_CFG
        .replace("bind :8080", &format!("bind 127.0.0.1:{port}"))
        .split("    server sluice-")
        .next()
        .unwrap_or("")
        .to_owned()
        + &servers
}

/// Waits for a stdout line containing `needle` (any case).
fn wait_line(p: &mut Proc, needle: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let line = p.line("", deadline.saturating_duration_since(Instant::now()))?;
        if line.to_ascii_lowercase().contains(needle) {
            return Ok(());
        }
    }
    Err(format!(
        "redis-server printed no {needle:?} line within {within:?}"
    ))
}
