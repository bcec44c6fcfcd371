//! The compose deployment read as files: deploy/compose.yaml (Redis, three replicas with their
//! own id and address and the same keys, HAProxy with deploy/haproxy.cfg on 8080, the demo
//! upstream, each replica built from deploy/Dockerfile); deploy/haproxy.cfg (the compose
//! replicas, round robin, no stickiness); deploy/cluster.toml (`sluice check` accepts it with
//! each replica's compose environment, and refuses it without the keys).
//!
//! What this cannot check: no Docker engine runs here, so nothing is built or started by
//! compose; its interpolation and merge rules are approximated (`${VAR:-x}` as if no variable
//! were set, `<<` merge keys). The Dockerfile and the example configs: `deploy_docker`;
//! HAProxy running deploy/haproxy.cfg: `deploy_haproxy`; the Helm chart: `deploy_helm`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use serde_yaml_ng::{Mapping, Value};

use super::deploy_kit::{read, repo};

pub(super) fn yaml(what: &str, text: &str) -> Value {
    let mut v: Value =
        serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("{what} is not YAML: {e}"));
    v.apply_merge()
        .unwrap_or_else(|e| panic!("{what}: a `<<` merge key does not merge: {e}"));
    v
}

pub(super) fn s<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} should be a string, not {v:?}"))
}

pub(super) fn seq<'a>(v: &'a Value, what: &str) -> &'a [Value] {
    v.as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("{what} should be a list, not {v:?}"))
}

// === compose ===

fn services() -> Mapping {
    yaml("compose.yaml", &read("deploy/compose.yaml"))["services"]
        .as_mapping()
        .cloned()
        .expect("compose.yaml has `services`")
}

fn service<'a>(svc: &'a Mapping, name: &str) -> &'a Value {
    svc.get(name).unwrap_or_else(|| {
        panic!(
            "deploy/compose.yaml has no service {name:?}: {:?}",
            svc.keys().collect::<Vec<_>>()
        )
    })
}

/// The Sluice replicas: the services named `sluice-*`, sorted.
fn replicas(svc: &Mapping) -> Vec<(String, Value)> {
    svc.iter()
        .filter_map(|(k, v)| {
            k.as_str()
                .filter(|k| k.starts_with("sluice-"))
                .map(|k| (k.to_owned(), v.clone()))
        })
        .collect()
}

/// A compose value as compose would give it with none of its variables set (`${X:-d}` is `d`).
fn interpolate(text: &str) -> String {
    let (mut out, mut rest) = (String::new(), text);
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let end = r
                .find('}')
                .unwrap_or_else(|| panic!("compose: unclosed ${{ in {text:?}"));
            let expr = &r[..end];
            out.push_str(
                expr.split_once(":-")
                    .or_else(|| expr.split_once('-'))
                    .map_or("", |(_, d)| d),
            );
            rest = &r[end + 1..];
        } else {
            panic!("compose: write ${{VAR}}, not a bare $, in {text:?}");
        }
    }
    out + rest
}

/// A service's environment (a mapping or a `K=V` list), interpolated.
fn env_of(name: &str, svc: &Value) -> BTreeMap<String, String> {
    let scalar = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .or_else(|| v.as_u64().map(|n| n.to_string()))
            .unwrap_or_default()
    };
    match &svc["environment"] {
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    s(k, "an environment name").to_owned(),
                    interpolate(&scalar(v)),
                )
            })
            .collect(),
        Value::Sequence(l) => l
            .iter()
            .filter_map(|e| s(e, "K=V").split_once('='))
            .map(|(k, v)| (k.into(), interpolate(v)))
            .collect(),
        other => panic!("compose service {name} has no environment: {other:?}"),
    }
}

/// `(source, target)` of a service's short-syntax volumes, the source resolved from deploy/.
fn volumes(name: &str, svc: &Value) -> Vec<(PathBuf, String)> {
    let list = seq(&svc["volumes"], &format!("{name}.volumes"));
    let one = |v: &Value| {
        let mut parts = s(v, "a volume").split(':');
        let src = repo().join("deploy").join(parts.next().unwrap_or_default());
        (
            std::fs::canonicalize(&src).unwrap_or(src),
            parts.next().unwrap_or_default().to_owned(),
        )
    };
    list.iter().map(one).collect()
}

fn url_host_port(url: &str) -> (String, u16) {
    let uri: http::Uri = url
        .parse()
        .unwrap_or_else(|e| panic!("{url:?} is not a URL: {e}"));
    (
        uri.host().unwrap_or_default().to_owned(),
        uri.port_u16()
            .unwrap_or_else(|| panic!("{url:?} names no port")),
    )
}

fn cluster_toml() -> toml::Table {
    read("deploy/cluster.toml")
        .parse()
        .unwrap_or_else(|e| panic!("deploy/cluster.toml is not TOML: {e}"))
}

#[test]
fn compose_runs_three_replicas_with_their_own_id_and_address_and_the_same_keys() {
    let svc = services();
    let reps = replicas(&svc);
    assert_eq!(
        reps.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["sluice-1", "sluice-2", "sluice-3"],
        "three replicas"
    );
    let internal = cluster_toml()["cluster"]["listen"]
        .as_str()
        .expect("cluster.listen")
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    let (mut ids, mut urls, mut shared) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (name, r) in &reps {
        let env = env_of(name, r);
        let get = |k: &str| {
            env.get(k)
                .cloned()
                .unwrap_or_else(|| panic!("{name} does not set {k}: {env:?}"))
        };
        let url = get("SLUICE_ADVERTISE_URL");
        assert_eq!(
            url_host_port(&url),
            (name.clone(), internal.parse().unwrap()),
            "{name}: others reach it by its name, cluster port"
        );
        ids.insert(get("SLUICE_ID"));
        urls.insert(url);
        shared.insert((get("SLUICE_STATE_KEYS"), get("SLUICE_API_KEYS")));
        let (mounts, config) = (
            volumes(name, r),
            std::fs::canonicalize(repo().join("deploy/cluster.toml")).unwrap(),
        );
        assert!(
            mounts.contains(&(config, "/etc/sluice.toml".into())),
            "{name} mounts deploy/cluster.toml at /etc/sluice.toml: {mounts:?}"
        );
    }
    assert_eq!(
        (ids.len(), urls.len()),
        (3, 3),
        "each replica its own SLUICE_ID and advertise URL: {ids:?} {urls:?}"
    );
    assert_eq!(
        shared.len(),
        1,
        "every replica gets the same SLUICE_STATE_KEYS and SLUICE_API_KEYS: {shared:?}"
    );
    assert!(
        read("deploy/Dockerfile").contains("\"/etc/sluice.toml\""),
        "the Dockerfile's entrypoint reads /etc/sluice.toml"
    );
}

#[test]
fn compose_builds_each_replica_from_deploy_dockerfile() {
    let want =
        std::fs::canonicalize(repo().join("deploy/Dockerfile")).expect("deploy/Dockerfile exists");
    for (name, r) in replicas(&services()) {
        let context = repo()
            .join("deploy")
            .join(s(&r["build"]["context"], &format!("{name}.build.context")));
        let file = context.join(r["build"]["dockerfile"].as_str().unwrap_or("Dockerfile"));
        assert_eq!(
            std::fs::canonicalize(&file).ok(),
            Some(want.clone()),
            "{name} builds from deploy/Dockerfile, not {}",
            file.display()
        );
    }
}

#[test]
fn compose_runs_redis_haproxy_and_the_demo_upstream_cluster_toml_names() {
    let svc = services();
    assert!(
        s(&service(&svc, "redis")["image"], "redis.image").starts_with("redis:"),
        "a redis image"
    );
    let toml = cluster_toml();
    let redis = url_host_port(
        toml["cluster"]["redis_url"]
            .as_str()
            .expect("cluster.redis_url"),
    );
    assert_eq!(
        redis,
        ("redis".into(), 6379),
        "cluster.toml's redis_url names the redis service"
    );
    let ha = service(&svc, "haproxy");
    assert!(
        s(&ha["image"], "haproxy.image").starts_with("haproxy:2.6"),
        "the haproxy:2.6 image"
    );
    let (cfg, mounts) = (
        std::fs::canonicalize(repo().join("deploy/haproxy.cfg")).unwrap(),
        volumes("haproxy", ha),
    );
    assert!(
        mounts.contains(&(cfg, "/usr/local/etc/haproxy/haproxy.cfg".into())),
        "haproxy mounts deploy/haproxy.cfg: {mounts:?}"
    );
    let ports: Vec<String> = seq(&ha["ports"], "haproxy.ports")
        .iter()
        .map(|p| s(p, "a port").to_owned())
        .collect();
    assert!(
        ports.iter().any(|p| p.ends_with("8080:8080")),
        "haproxy publishes 8080: {ports:?}"
    );
    for up in toml["upstream"]
        .as_array()
        .expect("[[upstream]] in cluster.toml")
    {
        let (host, port) = url_host_port(up["url"].as_str().expect("an upstream url"));
        let demo = service(&svc, &host);
        let cmd: Vec<&str> = seq(&demo["command"], "the demo's command")
            .iter()
            .map(|c| s(c, "a word"))
            .collect();
        assert!(
            cmd.iter()
                .any(|c| c.starts_with("@modelcontextprotocol/server-everything@")),
            "server-everything: {cmd:?}"
        );
        assert!(
            cmd.contains(&"streamableHttp"),
            "server-everything over streamable HTTP: {cmd:?}"
        );
        assert_eq!(
            env_of(&host, demo).get("PORT"),
            Some(&port.to_string()),
            "the demo listens where cluster.toml points"
        );
    }
}

#[test]
fn haproxy_balances_the_compose_replicas_round_robin_without_stickiness() {
    let cfg = read("deploy/haproxy.cfg");
    let lines: Vec<Vec<&str>> = cfg
        .lines()
        .map(|l| {
            l.split('#')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect()
        })
        .collect();
    let word = |w: &[&str], i: usize| w.get(i).copied().unwrap_or("").to_owned();
    let servers: BTreeSet<_> = lines
        .iter()
        .filter(|w| w.first() == Some(&"server"))
        .map(|w| (word(w, 1), word(w, 2)))
        .collect();
    let want: BTreeSet<(String, String)> = replicas(&services())
        .into_iter()
        .map(|(n, _)| (n.clone(), format!("{n}:8080")))
        .collect();
    assert_eq!(
        servers, want,
        "haproxy.cfg's servers are exactly the compose replicas on 8080"
    );
    assert!(
        lines.iter().any(|w| w[..] == ["balance", "roundrobin"]),
        "balance roundrobin"
    );
    assert!(
        lines.iter().any(|w| w[..] == ["bind", ":8080"]),
        "the frontend binds :8080"
    );
    for w in lines.iter().flatten() {
        let sticky = *w == "cookie"
            || w.starts_with("stick")
            || *w == "prefer-last-server"
            || *w == "source";
        assert!(
            !sticky,
            "haproxy.cfg must not pin a client to a replica, but says {w:?}"
        );
    }
}

// === cluster.toml ===

fn sluice_check(env: &BTreeMap<String, String>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("check")
        .arg("--config")
        .arg(repo().join("deploy/cluster.toml"));
    // Only what compose sets: nothing inherited stands in for a variable it leaves out.
    cmd.env_clear()
        .envs(env)
        .output()
        .expect("run sluice check")
}

#[test]
fn cluster_toml_passes_sluice_check_with_each_replicas_compose_environment() {
    for (name, r) in replicas(&services()) {
        let env = env_of(&name, &r);
        let out = sluice_check(&env);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "sluice check --config deploy/cluster.toml with {name}'s environment: {stderr}"
        );
        assert!(
            stdout.contains(&format!("\"{}\"", env["SLUICE_ID"])),
            "{name}'s id in the effective config:\n{stdout}"
        );
        let without = env
            .clone()
            .into_iter()
            .filter(|(k, _)| k != "SLUICE_STATE_KEYS")
            .collect();
        assert!(
            !sluice_check(&without).status.success(),
            "without SLUICE_STATE_KEYS the check fails (the keys are read)"
        );
    }
}
