//! The deployment files say what they should, read as files: deploy/compose.yaml (Redis, three
//! replicas with their own id and address and the same keys, HAProxy with deploy/haproxy.cfg on
//! 8080, the demo upstream, each replica built from deploy/Dockerfile); deploy/haproxy.cfg (the
//! compose replicas, round robin, no stickiness); deploy/cluster.toml (`sluice check` accepts it
//! with each replica's compose environment, and refuses it without the keys); the Helm chart
//! under deploy/helm/sluice (`{{ }}` and blocks balanced, every `.Values` path defined and every
//! value documented, the templates YAML once templating is taken out, the probes, the
//! PodDisruptionBudget); and deploy/Dockerfile's Rust (at least every locked `rust-version`).
//!
//! What this cannot check: no Docker engine and no `helm` binary run here, so nothing is built,
//! started or rendered; compose's own interpolation and merge rules are approximated (`${VAR:-x}`
//! as if no variable were set, `<<` merge keys), and Helm's template functions are not evaluated.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize as _;
use serde_yaml_ng::{Mapping, Value};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn yaml(what: &str, text: &str) -> Value {
    let mut v: Value = serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("{what} is not YAML: {e}"));
    v.apply_merge().unwrap_or_else(|e| panic!("{what}: a `<<` merge key does not merge: {e}"));
    v
}

fn s<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str().unwrap_or_else(|| panic!("{what} should be a string, not {v:?}"))
}

fn seq<'a>(v: &'a Value, what: &str) -> &'a [Value] {
    v.as_sequence().map(Vec::as_slice).unwrap_or_else(|| panic!("{what} should be a list, not {v:?}"))
}

// === compose ===

fn services() -> Mapping {
    yaml("compose.yaml", &read("deploy/compose.yaml"))["services"].as_mapping().cloned().expect("compose.yaml has `services`")
}

fn service<'a>(svc: &'a Mapping, name: &str) -> &'a Value {
    svc.get(name).unwrap_or_else(|| panic!("deploy/compose.yaml has no service {name:?}: {:?}", svc.keys().collect::<Vec<_>>()))
}

/// The Sluice replicas: the services named `sluice-*`, sorted.
fn replicas(svc: &Mapping) -> Vec<(String, Value)> {
    svc.iter().filter_map(|(k, v)| k.as_str().filter(|k| k.starts_with("sluice-")).map(|k| (k.to_owned(), v.clone()))).collect()
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
            let end = r.find('}').unwrap_or_else(|| panic!("compose: unclosed ${{ in {text:?}"));
            let expr = &r[..end];
            out.push_str(expr.split_once(":-").or_else(|| expr.split_once('-')).map_or("", |(_, d)| d));
            rest = &r[end + 1..];
        } else {
            panic!("compose: write ${{VAR}}, not a bare $, in {text:?}");
        }
    }
    out + rest
}

/// A service's environment (a mapping or a `K=V` list), interpolated.
fn env_of(name: &str, svc: &Value) -> BTreeMap<String, String> {
    let scalar = |v: &Value| v.as_str().map(str::to_owned).or_else(|| v.as_u64().map(|n| n.to_string())).unwrap_or_default();
    match &svc["environment"] {
        Value::Mapping(m) => m.iter().map(|(k, v)| (s(k, "an environment name").to_owned(), interpolate(&scalar(v)))).collect(),
        Value::Sequence(l) => l.iter().filter_map(|e| s(e, "K=V").split_once('=')).map(|(k, v)| (k.into(), interpolate(v))).collect(),
        other => panic!("compose service {name} has no environment: {other:?}"),
    }
}

/// `(source, target)` of a service's short-syntax volumes, the source resolved from deploy/.
fn volumes(name: &str, svc: &Value) -> Vec<(PathBuf, String)> {
    let list = seq(&svc["volumes"], &format!("{name}.volumes"));
    let one = |v: &Value| {
        let mut parts = s(v, "a volume").split(':');
        let src = repo().join("deploy").join(parts.next().unwrap_or_default());
        (std::fs::canonicalize(&src).unwrap_or(src), parts.next().unwrap_or_default().to_owned())
    };
    list.iter().map(one).collect()
}

fn url_host_port(url: &str) -> (String, u16) {
    let uri: http::Uri = url.parse().unwrap_or_else(|e| panic!("{url:?} is not a URL: {e}"));
    (uri.host().unwrap_or_default().to_owned(), uri.port_u16().unwrap_or_else(|| panic!("{url:?} names no port")))
}

fn cluster_toml() -> toml::Table {
    read("deploy/cluster.toml").parse().unwrap_or_else(|e| panic!("deploy/cluster.toml is not TOML: {e}"))
}

#[test]
fn compose_runs_three_replicas_with_their_own_id_and_address_and_the_same_keys() {
    let svc = services();
    let reps = replicas(&svc);
    assert_eq!(reps.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["sluice-1", "sluice-2", "sluice-3"], "three replicas");
    let internal = cluster_toml()["cluster"]["listen"].as_str().expect("cluster.listen").rsplit(':').next().unwrap_or_default().to_owned();
    let (mut ids, mut urls, mut shared) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (name, r) in &reps {
        let env = env_of(name, r);
        let get = |k: &str| env.get(k).cloned().unwrap_or_else(|| panic!("{name} does not set {k}: {env:?}"));
        let url = get("SLUICE_ADVERTISE_URL");
        assert_eq!(url_host_port(&url), (name.clone(), internal.parse().unwrap()), "{name}: others reach it by its name, cluster port");
        ids.insert(get("SLUICE_ID"));
        urls.insert(url);
        shared.insert((get("SLUICE_STATE_KEYS"), get("SLUICE_API_KEYS")));
        let (mounts, config) = (volumes(name, r), std::fs::canonicalize(repo().join("deploy/cluster.toml")).unwrap());
        assert!(mounts.contains(&(config, "/etc/sluice.toml".into())), "{name} mounts deploy/cluster.toml at /etc/sluice.toml: {mounts:?}");
    }
    assert_eq!((ids.len(), urls.len()), (3, 3), "each replica its own SLUICE_ID and advertise URL: {ids:?} {urls:?}");
    assert_eq!(shared.len(), 1, "every replica gets the same SLUICE_STATE_KEYS and SLUICE_API_KEYS: {shared:?}");
    assert!(read("deploy/Dockerfile").contains("\"/etc/sluice.toml\""), "the Dockerfile's entrypoint reads /etc/sluice.toml");
}

#[test]
fn compose_builds_each_replica_from_deploy_dockerfile() {
    let want = std::fs::canonicalize(repo().join("deploy/Dockerfile")).expect("deploy/Dockerfile exists");
    for (name, r) in replicas(&services()) {
        let context = repo().join("deploy").join(s(&r["build"]["context"], &format!("{name}.build.context")));
        let file = context.join(r["build"]["dockerfile"].as_str().unwrap_or("Dockerfile"));
        assert_eq!(std::fs::canonicalize(&file).ok(), Some(want.clone()), "{name} builds from deploy/Dockerfile, not {}", file.display());
    }
}

#[test]
fn compose_runs_redis_haproxy_and_the_demo_upstream_cluster_toml_names() {
    let svc = services();
    assert!(s(&service(&svc, "redis")["image"], "redis.image").starts_with("redis:"), "a redis image");
    let toml = cluster_toml();
    let redis = url_host_port(toml["cluster"]["redis_url"].as_str().expect("cluster.redis_url"));
    assert_eq!(redis, ("redis".into(), 6379), "cluster.toml's redis_url names the redis service");
    let ha = service(&svc, "haproxy");
    assert!(s(&ha["image"], "haproxy.image").starts_with("haproxy:2.6"), "the haproxy:2.6 image");
    let (cfg, mounts) = (std::fs::canonicalize(repo().join("deploy/haproxy.cfg")).unwrap(), volumes("haproxy", ha));
    assert!(mounts.contains(&(cfg, "/usr/local/etc/haproxy/haproxy.cfg".into())), "haproxy mounts deploy/haproxy.cfg: {mounts:?}");
    let ports: Vec<String> = seq(&ha["ports"], "haproxy.ports").iter().map(|p| s(p, "a port").to_owned()).collect();
    assert!(ports.iter().any(|p| p.ends_with("8080:8080")), "haproxy publishes 8080: {ports:?}");
    for up in toml["upstream"].as_array().expect("[[upstream]] in cluster.toml") {
        let (host, port) = url_host_port(up["url"].as_str().expect("an upstream url"));
        let demo = service(&svc, &host);
        let cmd: Vec<&str> = seq(&demo["command"], "the demo's command").iter().map(|c| s(c, "a word")).collect();
        assert!(cmd.iter().any(|c| c.starts_with("@modelcontextprotocol/server-everything@")), "server-everything: {cmd:?}");
        assert!(cmd.contains(&"streamableHttp"), "server-everything over streamable HTTP: {cmd:?}");
        assert_eq!(env_of(&host, demo).get("PORT"), Some(&port.to_string()), "the demo listens where cluster.toml points");
    }
}

#[test]
fn haproxy_balances_the_compose_replicas_round_robin_without_stickiness() {
    let cfg = read("deploy/haproxy.cfg");
    let lines: Vec<Vec<&str>> = cfg.lines().map(|l| l.split('#').next().unwrap_or("").split_whitespace().collect()).collect();
    let word = |w: &[&str], i: usize| w.get(i).copied().unwrap_or("").to_owned();
    let servers: BTreeSet<_> = lines.iter().filter(|w| w.first() == Some(&"server")).map(|w| (word(w, 1), word(w, 2))).collect();
    let want: BTreeSet<(String, String)> = replicas(&services()).into_iter().map(|(n, _)| (n.clone(), format!("{n}:8080"))).collect();
    assert_eq!(servers, want, "haproxy.cfg's servers are exactly the compose replicas on 8080");
    assert!(lines.iter().any(|w| w[..] == ["balance", "roundrobin"]), "balance roundrobin");
    assert!(lines.iter().any(|w| w[..] == ["bind", ":8080"]), "the frontend binds :8080");
    for w in lines.iter().flatten() {
        let sticky = *w == "cookie" || w.starts_with("stick") || *w == "prefer-last-server" || *w == "source";
        assert!(!sticky, "haproxy.cfg must not pin a client to a replica, but says {w:?}");
    }
}

// === cluster.toml ===

fn sluice_check(env: &BTreeMap<String, String>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("check").arg("--config").arg(repo().join("deploy/cluster.toml"));
    // Only what compose sets: nothing inherited stands in for a variable it leaves out.
    cmd.env_clear().envs(env).output().expect("run sluice check")
}

#[test]
fn cluster_toml_passes_sluice_check_with_each_replicas_compose_environment() {
    for (name, r) in replicas(&services()) {
        let env = env_of(&name, &r);
        let out = sluice_check(&env);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "sluice check --config deploy/cluster.toml with {name}'s environment: {stderr}");
        assert!(stdout.contains(&format!("\"{}\"", env["SLUICE_ID"])), "{name}'s id in the effective config:\n{stdout}");
        let without = env.clone().into_iter().filter(|(k, _)| k != "SLUICE_STATE_KEYS").collect();
        assert!(!sluice_check(&without).status.success(), "without SLUICE_STATE_KEYS the check fails (the keys are read)");
    }
}

// === Helm ===

const CHART: &str = "deploy/helm/sluice";

fn templates() -> Vec<(String, String)> {
    let dir = std::fs::read_dir(repo().join(CHART).join("templates")).expect("the chart's templates/");
    let mut names: Vec<String> = dir.map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names.into_iter().map(|n| (format!("templates/{n}"), read(&format!("{CHART}/templates/{n}")))).collect()
}

fn values() -> Value {
    yaml("values.yaml", &read(&format!("{CHART}/values.yaml")))
}

/// The actions of a template, `{{` to `}}`; panics on one left open or a stray `}}`.
fn actions<'a>(file: &str, text: &'a str) -> Vec<&'a str> {
    let (mut out, mut rest) = (Vec::new(), text);
    loop {
        match (rest.find("{{"), rest.find("}}")) {
            (None, None) => return out,
            (Some(o), Some(c)) if o < c => {
                let inner = &rest[o + 2..c];
                assert!(!inner.contains("{{"), "{file}: `{{{{` inside an action: {inner:?}");
                out.push(inner);
                rest = &rest[c + 2..];
            }
            _ => panic!("{file}: unbalanced `{{{{ … }}}}` near {:?}", &rest[..rest.len().min(60)]),
        }
    }
}

#[test]
fn helm_templates_have_balanced_actions_and_blocks() {
    for (file, text) in templates() {
        let mut open: Vec<&str> = Vec::new();
        for a in actions(&file, &text) {
            let word = a.trim_start_matches('-').split_whitespace().next().unwrap_or("");
            match word {
                "if" | "range" | "with" | "define" | "block" => open.push(word),
                "end" => assert!(open.pop().is_some(), "{file}: an {{{{ end }}}} closes nothing"),
                _ => {}
            }
        }
        assert!(open.is_empty(), "{file}: blocks left open: {open:?}");
    }
}

/// The `.Values.a.b` paths a text uses.
fn value_paths(text: &str) -> impl Iterator<Item = String> + '_ {
    let path = |t: &str| t.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.')).collect::<String>();
    text.match_indices(".Values.").map(move |(i, _)| path(&text[i + ".Values.".len()..]).trim_end_matches('.').to_owned())
}

#[test]
fn helm_templates_use_only_values_values_yaml_defines() {
    let values = values();
    let mut used = 0;
    for (file, text) in templates() {
        for path in value_paths(&text) {
            let missing = || panic!("{file} uses .Values.{path}: not in values.yaml");
            path.split('.').fold(&values, |at, seg| at.as_mapping().and_then(|m| m.get(seg)).unwrap_or_else(missing));
            used += 1;
        }
    }
    assert!(used > 10, "the templates use values ({used} found)");
}

/// Every leaf of values.yaml as a scanner of its lines sees it: (dotted path, documented by a
/// comment line just above). A sequence or an empty mapping is a leaf; a block scalar's lines
/// are its own.
fn scanned_leaves(text: &str) -> BTreeMap<String, bool> {
    let lines: Vec<&str> = text.lines().collect();
    let content = |l: &str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
    let indent = |l: &str| l.len() - l.trim_start().len();
    let (mut out, mut stack, mut block) = (BTreeMap::new(), Vec::<(usize, String)>::new(), None::<usize>);
    for (i, line) in lines.iter().enumerate() {
        let ind = indent(line);
        if block.is_some_and(|b| ind > b || line.trim().is_empty()) || !content(line) || line.trim_start().starts_with('-') {
            continue;
        }
        block = None;
        let (key, rest) = line.trim().split_once(':').map(|(k, r)| (k, r.trim())).expect("values.yaml: a `key: value` line");
        stack.retain(|(d, _)| *d < ind);
        let path = stack.iter().map(|(_, k)| k.as_str()).chain([key]).collect::<Vec<_>>().join(".");
        let next = lines[i + 1..].iter().find(|l| content(l));
        let container = rest.is_empty() && next.is_some_and(|n| indent(n) > ind && !n.trim_start().starts_with('-'));
        if container {
            stack.push((ind, key.to_owned()));
            continue;
        }
        block = rest.starts_with(['|', '>']).then_some(ind);
        out.insert(path, i > 0 && lines[i - 1].trim_start().starts_with('#'));
    }
    out
}

fn parsed_leaves(prefix: &str, v: &Value, out: &mut BTreeSet<String>) {
    match v.as_mapping().filter(|m| !m.is_empty()) {
        Some(m) => m.iter().for_each(|(k, v)| parsed_leaves(&format!("{prefix}{}.", s(k, "a values.yaml key")), v, out)),
        None => drop(out.insert(prefix.trim_end_matches('.').to_owned())),
    }
}

#[test]
fn helm_values_are_each_documented_by_a_comment_line() {
    let scanned = scanned_leaves(&read(&format!("{CHART}/values.yaml")));
    let mut parsed = BTreeSet::new();
    parsed_leaves("", &values(), &mut parsed);
    assert_eq!(scanned.keys().cloned().collect::<BTreeSet<_>>(), parsed, "values.yaml read line by line and parsed disagree");
    let undocumented: Vec<&String> = scanned.iter().filter(|(_, doc)| !**doc).map(|(k, _)| k).collect();
    assert!(undocumented.is_empty(), "values.yaml: no comment line above {undocumented:?}");
}

/// A template with its templating taken out: lines that are only actions dropped, each other
/// action a distinct placeholder scalar.
fn untemplated(file: &str, text: &str) -> String {
    let (mut n, mut out) = (0, String::new());
    for line in text.lines() {
        let mut kept = line.to_owned();
        for a in actions(file, line) {
            n += 1;
            kept = kept.replacen(&format!("{{{{{a}}}}}"), &format!("TEMPLATED_{n}"), 1);
        }
        let placeholder = |w: &str| w.strip_prefix("TEMPLATED_").is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()));
        let only_actions = line.contains("{{") && kept.split_whitespace().all(placeholder);
        if !only_actions {
            out.push_str(&kept);
            out.push('\n');
        }
    }
    out
}

fn rendered_docs() -> Vec<(String, Value)> {
    let yamls = templates().into_iter().filter(|(f, _)| f.ends_with(".yaml"));
    let mut out = Vec::new();
    for (file, text) in yamls {
        let plain = untemplated(&file, &text);
        for d in serde_yaml_ng::Deserializer::from_str(&plain) {
            out.push((file.clone(), Value::deserialize(d).unwrap_or_else(|e| panic!("{file} untemplated is not YAML: {e}\n{plain}"))));
        }
    }
    out
}

#[test]
fn helm_templates_are_yaml_once_templating_is_taken_out() {
    let docs = rendered_docs();
    for (file, d) in &docs {
        assert!(d["apiVersion"].is_string() && d["kind"].is_string(), "{file}: a resource with apiVersion and kind: {d:?}");
    }
    let kinds: BTreeSet<&str> = docs.iter().map(|(_, d)| s(&d["kind"], "kind")).collect();
    let want = ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service"];
    assert!(want.iter().all(|k| kinds.contains(k)), "the chart holds {want:?}: {kinds:?}");
    let chart = yaml("Chart.yaml", &read(&format!("{CHART}/Chart.yaml")));
    assert_eq!((chart["apiVersion"].as_str(), chart["name"].as_str()), (Some("v2"), Some("sluice")), "Chart.yaml");
    assert!(repo().join(CHART).join("templates/NOTES.txt").is_file(), "templates/NOTES.txt");
}

#[test]
fn helm_deployment_probes_health_and_gives_each_pod_its_id_and_address() {
    let docs = rendered_docs();
    let dep = docs.iter().find(|(f, d)| f == "templates/deployment.yaml" && d["kind"] == "Deployment").expect("templates/deployment.yaml");
    let c = &seq(&dep.1["spec"]["template"]["spec"]["containers"], "containers")[0];
    assert_eq!(c["livenessProbe"]["httpGet"]["path"].as_str(), Some("/healthz"), "liveness on /healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"].as_str(), Some("/readyz"), "readiness on /readyz");
    let env: BTreeMap<&str, &Value> = seq(&c["env"], "env").iter().map(|e| (s(&e["name"], "an env name"), e)).collect();
    let field = |k: &str| env.get(k).and_then(|e| e["valueFrom"]["fieldRef"]["fieldPath"].as_str());
    assert_eq!((field("SLUICE_ID"), field("POD_IP")), (Some("metadata.name"), Some("status.podIP")), "the downward API");
    let advertise = env.get("SLUICE_ADVERTISE_URL").and_then(|e| e["value"].as_str()).unwrap_or_default();
    assert!(advertise.starts_with("http://$(POD_IP):"), "SLUICE_ADVERTISE_URL from POD_IP: {advertise:?}");
    for k in ["SLUICE_STATE_KEYS", "SLUICE_API_KEYS"] {
        assert!(env.get(k).is_some_and(|e| e["valueFrom"]["secretKeyRef"].is_mapping()), "{k} from the Secret");
    }
    assert!(c["volumeMounts"].as_sequence().is_some_and(|v| !v.is_empty()), "the ConfigMap mounted");
}

fn version(v: &str) -> Vec<u64> {
    v.split('.').map(|n| n.parse().unwrap_or_else(|_| panic!("{v:?} is not a version"))).collect()
}

#[test]
fn dockerfile_rust_is_at_least_every_locked_rust_version() {
    let args = ["metadata", "--format-version", "1", "--locked", "--manifest-path"];
    let out =
        Command::new(option_env!("CARGO").unwrap_or("cargo")).args(args).arg(repo().join("Cargo.toml")).output().expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata --locked: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let pkgs = meta["packages"].as_array().expect("packages");
    let need = pkgs.iter().filter_map(|p| Some((version(p["rust_version"].as_str()?), p["name"].as_str()?))).max().expect("a rust_version");
    let docker = read("deploy/Dockerfile");
    let tag = docker.lines().find_map(|l| l.trim().strip_prefix("FROM rust:")).expect("a `FROM rust:X.Y` build stage");
    let have = version(tag.split(['-', ' ']).next().unwrap_or_default());
    // `rust:1.89` is the newest 1.89.x: compare as many parts as the tag gives.
    let n = have.len().min(need.0.len());
    assert!(n >= 2 && have[..n] >= need.0[..n], "FROM rust:{tag} is older than {} {:?} needs (its rust-version)", need.1, need.0);
}
