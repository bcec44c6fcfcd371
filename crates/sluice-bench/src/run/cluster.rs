//! The `[cluster]` rows (issue 13): the production-like Sluice with Redis added, and two such
//! replicas behind HAProxy round robin (`deploy/haproxy.cfg`), driven by the same wrk call.
//! Takes the mock's two URLs; gives the processes (held until the runs end) and adds their
//! paths. Refuses nothing: without `redis-server` or `haproxy` on the machine it adds no row and
//! says so (`scripts/bench.sh` installs both on a full run).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::http::{start_sluice, Path4};
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
    let mut redis = b.env.spawn("redis", &redis_bin, &args, &[], true)?;
    wait_line(
        &mut redis,
        "ready to accept connections",
        Duration::from_secs(10),
    )?;
    let url = format!("redis+unix://{}", socket.display());
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
    let mut backends = Vec::new();
    for id in ["c1", "c2"] {
        let (p, u) = start_sluice(
            &b.env,
            &b.o.sluice,
            &format!("sluice-{id}"),
            config(&prod(&audit(id)), id, &url),
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
    let port = procs::free_port()?;
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, a)| format!("    server sluice-{} {a}\n", i + 1))
        .collect();
    let cfg = HAPROXY_CFG
        .replace("bind :8080", &format!("bind 127.0.0.1:{port}"))
        .split("    server sluice-")
        .next()
        .unwrap_or("")
        .to_owned()
        + &servers;
    let cfg_path = b.o.dir.join("haproxy.cfg");
    std::fs::write(&cfg_path, cfg).map_err(|e| e.to_string())?;
    procs.push(b.env.spawn(
        "haproxy",
        &haproxy_bin,
        &["-db".into(), "-f".into(), cfg_path.display().to_string()],
        &[],
        false,
    )?);
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
        super::http::sanity(&b.c, &url, "alpha__echo", Some(wire::API_KEY)).await?;
        let script = b.o.dir.join(format!("call-{}.lua", paths.len()));
        std::fs::write(
            &script,
            wire::wrk_script("alpha__echo", Some(wire::API_KEY)),
        )
        .map_err(|e| e.to_string())?;
        paths.push(Path4 {
            label: label.to_owned(),
            url,
            script,
            tput: Vec::new(),
            lat: Vec::new(),
        });
    }
    Ok(Some(Held { _procs: procs }))
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
