//! The Helm chart deploy/helm/sluice rendered by Helm's own engine: helm-python-sdk, Helm
//! v4's Go SDK as a library (`$SLUICE_HELM_PY tests/peers/helm_chart.py`, from scripts/peers.sh;
//! no `helm` binary or Go toolchain can be had here, and no cluster runs).
//!
//! The values are those of the `helm install` lines the chart documents (deploy/README.md's,
//! with the `kubectl create secret` line before it, and values.yaml's), run in bash with `helm`
//! and `kubectl` stand-ins that record their words, composed as helm composes `--set`,
//! `--set-string` and `--set-json`; and of variants for headers, stdio env, an external Redis
//! and an existing keys Secret. For each render:
//!
//! - `helm lint` with those values reports no error and no warning;
//! - a pod as the kubelet would start it: the Deployment's command, its environment (`fieldRef`:
//!   a pod name and address; `secretKeyRef`: a rendered Secret's key, or one of the Secrets the
//!   documented `kubectl` line or the test creates as the user's own; `$(VAR)` expanded), its
//!   Secret volumes written as files; `sluice check` in place of `sluice serve` accepts the config;
//! - nothing referenced that the chart does not deploy: every Secret the pod reads is rendered or
//!   the user's, the Redis host is a rendered Service (or `redis.externalUrl`), every upstream
//!   host was given in the values, and each Service selects pods the chart runs.
//!
//! Not checked: that an API server accepts the manifests (no schema beyond Helm's lint), the
//! image, or pods running.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_yaml_ng::Value;

use super::deploy::{s, seq};
use super::deploy_kit::{assert_check_ok, documented, read, repo, run_documented};
use crate::support::peers::{peer_env, script};
use crate::support::process::scratch;

/// A render: its manifests (template path, one YAML document), or Helm's error.
struct Render {
    docs: Vec<(String, Value)>,
    lint: serde_json::Value,
}

/// Secrets the user made (name to key to value): the `kubectl create secret` lines' ones.
type Theirs = BTreeMap<String, BTreeMap<String, String>>;

fn render(helm_argv: &[String]) -> Result<Render, String> {
    assert_eq!(
        helm_argv.first().map(String::as_str),
        Some("helm"),
        "a helm command: {helm_argv:?}"
    );
    let mut child = Command::new(peer_env("SLUICE_HELM_PY"))
        .arg(script("helm_chart.py"))
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tests/peers/helm_chart.py");
    let request = serde_json::json!({ "argv": helm_argv[1..] });
    std::io::Write::write_all(
        &mut child.stdin.take().expect("stdin"),
        request.to_string().as_bytes(),
    )
    .expect("write the request");
    let out = child.wait_with_output().expect("helm_chart.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helm_chart.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("helm_chart.py's answer {text:?}: {e}"));
    if let Some(e) = answer["error"].as_str() {
        return Err(e.to_owned());
    }
    let mut docs = Vec::new();
    for (path, manifest) in answer["manifests"].as_object().expect("manifests") {
        if !path.ends_with(".yaml") {
            continue; // NOTES.txt
        }
        for d in serde_yaml_ng::Deserializer::from_str(manifest.as_str().unwrap_or_default()) {
            let v: Value = serde::Deserialize::deserialize(d)
                .unwrap_or_else(|e| panic!("{path} renders no YAML: {e}\n{manifest}"));
            if !v.is_null() {
                docs.push((path.clone(), v));
            }
        }
    }
    Ok(Render {
        docs,
        lint: answer["lint"].clone(),
    })
}

impl Render {
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.docs
            .iter()
            .map(|(_, d)| d)
            .filter(|d| d["kind"] == kind)
            .collect()
    }

    fn named(&self, kind: &str, name: &str) -> Option<&Value> {
        self.all(kind)
            .into_iter()
            .find(|d| d["metadata"]["name"] == name)
    }

    /// The Sluice Deployment.
    fn gateway(&self) -> &Value {
        let deps = self.all("Deployment");
        let sluice = deps
            .into_iter()
            .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "gateway")
            .collect::<Vec<_>>();
        let [d] = sluice[..] else {
            panic!("one Sluice Deployment: {}", sluice.len())
        };
        d
    }

    /// A rendered Secret's key, or one of the user's.
    fn secret(&self, theirs: &Theirs, name: &str, key: &str) -> String {
        let ours = self.named("Secret", name).and_then(|s| {
            let plain = s["stringData"][key].as_str().map(str::to_owned);
            let b64 = || {
                s["data"][key].as_str().map(|b| {
                    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).ok()?)
                        .ok()
                })
            };
            plain.or_else(|| b64().flatten())
        });
        let user = || theirs.get(name).and_then(|s| s.get(key)).cloned();
        ours.or_else(user)
            .unwrap_or_else(|| panic!("the pod reads Secret {name:?} key {key:?}: the chart renders none, and it is not the user's"))
    }

    fn assert_lint_clean(&self, what: &str) {
        let worst = self.lint["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["severity"].as_u64() >= Some(2));
        let bad: Vec<&serde_json::Value> = worst
            .chain(self.lint["errors"].as_array().into_iter().flatten())
            .collect();
        assert!(
            bad.is_empty() && self.lint["total_charts_linted"] == 1,
            "{what}: helm lint: {bad:?} ({})",
            self.lint
        );
    }
}

/// A pod's environment as the kubelet gives it.
fn pod_env(r: &Render, c: &Value, pod: &str, theirs: &Theirs) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for e in seq(&c["env"], "env") {
        let name = s(&e["name"], "an env name").to_owned();
        let from = &e["valueFrom"];
        let value = if let Some(v) = e["value"].as_str() {
            env.iter()
                .fold(v.to_owned(), |v, (k, x): (&String, &String)| {
                    v.replace(&format!("$({k})"), x)
                })
        } else if let Some(field) = from["fieldRef"]["fieldPath"].as_str() {
            match field {
                "metadata.name" => pod.to_owned(),
                "status.podIP" => "10.244.1.7".to_owned(),
                other => panic!("{name}: fieldRef {other} is not one this test gives"),
            }
        } else {
            let key_ref = &from["secretKeyRef"];
            r.secret(
                theirs,
                s(&key_ref["name"], "secretKeyRef.name"),
                s(&key_ref["key"], "secretKeyRef.key"),
            )
        };
        env.insert(name, value);
    }
    env
}

/// What a pod of the render would start, with `check` for `serve`: its output and the config
/// file it read.
fn pod_check(
    r: &Render,
    theirs: &Theirs,
) -> (std::process::Output, toml::Table, BTreeMap<String, String>) {
    let dep = r.gateway();
    let spec = &dep["spec"]["template"]["spec"];
    let c = seq(&spec["containers"], "containers")
        .iter()
        .find(|c| c["name"] == "sluice")
        .expect("the sluice container");
    let pod = format!(
        "{}-5d8c7b9f4-x2x7q",
        s(&dep["metadata"]["name"], "the Deployment's name")
    );
    let env = pod_env(r, c, &pod, theirs);
    let root = scratch("pod");
    let volumes: BTreeMap<&str, &Value> = seq(&spec["volumes"], "volumes")
        .iter()
        .map(|v| (s(&v["name"], "a volume name"), v))
        .collect();
    let mut mounts = Vec::new();
    for m in seq(&c["volumeMounts"], "volumeMounts") {
        let (name, at) = (
            s(&m["name"], "a mount's volume"),
            s(&m["mountPath"], "mountPath"),
        );
        let v = volumes
            .get(name)
            .unwrap_or_else(|| panic!("mount of volume {name:?}, which the pod does not have"));
        let dir = root.join(at.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).expect("a mount directory");
        if let Some(secret) = v["secret"]["secretName"].as_str() {
            let rendered = r
                .named("Secret", secret)
                .unwrap_or_else(|| panic!("volume {name:?}: Secret {secret:?} is not rendered"));
            for (k, _) in rendered["stringData"].as_mapping().expect("stringData") {
                let k = s(k, "a key");
                std::fs::write(dir.join(k), r.secret(&Theirs::new(), secret, k))
                    .expect("write a Secret key");
            }
        } else {
            assert!(
                v["emptyDir"].is_mapping(),
                "volume {name:?}: a Secret or an emptyDir: {v:?}"
            );
        }
        mounts.push((at.to_owned(), dir));
    }
    let argv: Vec<String> = [&c["command"], &c["args"]]
        .iter()
        .filter(|v| !v.is_null())
        .flat_map(|v| seq(v, "command"))
        .map(|w| s(w, "a word").to_owned())
        .collect();
    assert_eq!(
        argv.get(..2),
        Some(&["/usr/local/bin/sluice".to_owned(), "serve".to_owned()][..]),
        "the pod runs `sluice serve`: {argv:?}"
    );
    let mapped = argv[2..].iter().map(|a| {
        mounts
            .iter()
            .find_map(|(at, dir)| {
                Some(format!("{}{}", dir.display(), a.strip_prefix(at.as_str())?))
            })
            .unwrap_or(a.clone())
    });
    let mapped: Vec<String> = mapped.collect();
    let config = mapped
        .iter()
        .skip_while(|a| *a != "--config")
        .nth(1)
        .expect("--config FILE");
    let file: toml::Table = std::fs::read_to_string(config)
        .expect("the config file")
        .parse()
        .expect("the config is TOML");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("check")
        .args(&mapped)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(&env);
    (cmd.output().expect("run sluice check"), file, env)
}

/// Renders `argv`, checks lint, the pod and every reference; gives the render, the config and the
/// pod's environment.
fn deployable(
    what: &str,
    argv: &[String],
    theirs: &Theirs,
) -> (Render, toml::Table, BTreeMap<String, String>) {
    let r = render(argv).unwrap_or_else(|e| panic!("{what}: helm refuses to render it: {e}"));
    r.assert_lint_clean(what);
    let (out, config, env) = pod_check(&r, theirs);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_check_ok(
        &format!("{what}: the pod's config"),
        out.status.success(),
        &stdout,
        &stderr,
    );
    assert!(
        env["SLUICE_ADVERTISE_URL"].starts_with("http://10.244.1.7:"),
        "each pod advertises its own address"
    );
    let cluster = config["cluster"].as_table().expect("[cluster]");
    let redis: http::Uri = cluster["redis_url"]
        .as_str()
        .expect("redis_url")
        .parse()
        .expect("a redis URL");
    let host = redis.host().unwrap_or_default();
    let given = argv.join(" ");
    assert!(
        r.named("Service", host).is_some() || given.contains(host),
        "{what}: redis_url names {host:?}, which the chart does not deploy"
    );
    for up in config["upstream"].as_array().expect("[[upstream]]") {
        if let Some(url) = up.get("url").and_then(|u| u.as_str()) {
            let uri: http::Uri = url.parse().expect("an upstream URL");
            assert!(
                given.contains(uri.host().unwrap_or_default()),
                "{what}: upstream {url} was not given in the values"
            );
        }
    }
    for svc in r.all("Service") {
        let sel = svc["spec"]["selector"].as_mapping().expect("a selector");
        let pods = r
            .all("Deployment")
            .into_iter()
            .map(|d| &d["spec"]["template"]["metadata"]["labels"]);
        let matching = pods.filter(|l| sel.iter().all(|(k, v)| &l[k] == v)).count();
        assert_eq!(
            matching, 1,
            "{what}: Service {:?} selects the pods of one Deployment",
            svc["metadata"]["name"]
        );
    }
    (r, config, env)
}

/// The user's Secrets a documented `kubectl create secret generic NAME --from-literal=K=V` makes.
fn their_secrets(calls: &[Vec<String>]) -> Theirs {
    let mut out = Theirs::new();
    for c in calls.iter().filter(|c| {
        c.get(..4) == Some(&["kubectl", "create", "secret", "generic"].map(String::from)[..])
    }) {
        let literals = c[5..].iter().map(|w| {
            w.strip_prefix("--from-literal=")
                .unwrap_or_else(|| panic!("kubectl: {w} is not understood by this test"))
        });
        let pairs = literals.map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .expect("--from-literal=KEY=VALUE")
        });
        out.insert(c[4].clone(), pairs.collect());
    }
    out
}

#[test]
fn helm_documented_installs_render_pods_whose_config_sluice_check_accepts() {
    let readme = read("deploy/README.md");
    let values = read("deploy/helm/sluice/values.yaml");
    let docs = [
        (
            "deploy/README.md",
            documented(&readme, "", "kubectl create secret"),
            documented(&readme, "", "helm install"),
        ),
        (
            "values.yaml",
            vec![],
            documented(&values, "#", "helm install"),
        ),
    ];
    for (file, kubectl, helm) in docs {
        let [helm] = &helm[..] else {
            panic!("{file} documents one `helm install`: {helm:?}")
        };
        let ran = run_documented(
            &[kubectl, vec![helm.clone()]].concat().join("\n"),
            &["helm", "kubectl"],
        );
        assert!(ran.ok, "{file}'s commands: {}", ran.stderr);
        let (calls, theirs) = (&ran.calls, their_secrets(&ran.calls));
        let argv = calls
            .iter()
            .find(|c| c[0] == "helm")
            .expect("the helm call");
        let (r, config, env) = deployable(file, argv, &theirs);
        let names: Vec<&str> = config["upstream"]
            .as_array()
            .expect("upstreams")
            .iter()
            .filter_map(|u| u["name"].as_str())
            .collect();
        for name in argv
            .iter()
            .filter_map(|w| w.split_once("].name=").map(|(_, n)| n))
        {
            assert!(
                names.contains(&name),
                "{file}: upstream {name} is in the config: {names:?}"
            );
        }
        for (secret, keys) in &theirs {
            assert!(
                keys.values().all(|v| env.values().any(|e| e == v)),
                "{file}: the pod gets {secret:?}'s value: {env:?}"
            );
        }
        let dep = r.gateway();
        let c = &seq(&dep["spec"]["template"]["spec"]["containers"], "containers")[0];
        assert_eq!(
            c["livenessProbe"]["httpGet"]["path"].as_str(),
            Some("/healthz"),
            "liveness on /healthz"
        );
        assert_eq!(
            c["readinessProbe"]["httpGet"]["path"].as_str(),
            Some("/readyz"),
            "readiness on /readyz"
        );
        assert_eq!(
            env["SLUICE_ID"],
            format!("{}-5d8c7b9f4-x2x7q", s(&dep["metadata"]["name"], "name")),
            "cluster.id: the pod's name"
        );
        assert!(
            !r.all("PodDisruptionBudget").is_empty(),
            "a PodDisruptionBudget"
        );
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    ["helm", "install", "gw", "deploy/helm/sluice"]
        .iter()
        .chain(words)
        .map(|w| w.to_string())
        .collect()
}

const KEYS: [&str; 4] = [
    "--set-string",
    "secrets.stateKeys=1:c2x1aWNlLWRlbW8tc3RhdGUta2V5LVJFUExBQ0UtTUU=",
    "--set-string",
    "secrets.apiKeys=02993d1350a15fb4eec7cccc89d2b62f77ec1af5f3dcde5fbde6f55699af2866=demo",
];

#[test]
fn helm_chart_writes_headers_bearer_token_stdio_command_env_and_settings_into_the_pods_config() {
    // What toJson must escape for TOML (given as JSON: `--set` reads a backslash as an escape).
    let header = "v<1>&\"quoted\"\\slash é";
    let set_header = format!(
        "config.upstreams[0].headers.X-Api-Key={}",
        serde_json::Value::from(header)
    );
    let words = [
        &KEYS[..],
        &["--set", "config.upstreams[0].name=weather", "--set", "config.upstreams[0].url=http://weather.tools.svc:9000/mcp"],
        &["--set-json", &set_header, "--set", "config.upstreams[0].settings.max_in_flight=64"],
        &["--set", "config.upstreams[0].bearerTokenSecret.name=wt", "--set", "config.upstreams[0].bearerTokenSecret.key=token"],
        &["--set", "config.upstreams[1].name=files", "--set-string", "config.upstreams[1].env.FILES_MODE=read only"],
        &["--set-json", r#"config.upstreams[1].command=["npx","-y","@modelcontextprotocol/server-filesystem@2026.8.31","/srv"]"#],
    ]
    .concat();
    let theirs = Theirs::from([(
        "wt".to_owned(),
        BTreeMap::from([("token".to_owned(), "the-token".to_owned())]),
    )]);
    let (_, config, env) = deployable("headers, token, stdio", &argv(&words), &theirs);
    let ups = config["upstream"].as_array().expect("upstreams");
    assert_eq!(
        ups[0]["headers"]["X-Api-Key"].as_str(),
        Some(header),
        "the header value reaches the config unchanged"
    );
    assert_eq!(
        ups[0]["max_in_flight"].as_integer(),
        Some(64),
        "a setting as written"
    );
    let token_env = ups[0]["bearer_token_env"]
        .as_str()
        .expect("bearer_token_env");
    assert_eq!(
        env.get(token_env).map(String::as_str),
        Some("the-token"),
        "the pod's {token_env} is the user's Secret's value"
    );
    let command: Vec<&str> = ups[1]["command"]
        .as_array()
        .expect("a command")
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert_eq!(
        command,
        [
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem@2026.8.31",
            "/srv"
        ],
        "the stdio command"
    );
    assert_eq!(
        ups[1]["env"]["FILES_MODE"].as_str(),
        Some("read only"),
        "its env"
    );
    assert_eq!(
        (
            env.get("HOME").map(String::as_str),
            env.get("TMPDIR").map(String::as_str)
        ),
        (Some("/home/sluice"), Some("/tmp")),
        "scratch"
    );
}

#[test]
fn helm_chart_with_external_redis_and_existing_secret_renders_neither_and_reads_them() {
    let words = [
        "--set",
        "redis.enabled=false",
        "--set",
        "redis.externalUrl=redis://redis.data.svc:6379/2",
        "--set",
        "secrets.existingSecret=gw-keys",
        "--set",
        "config.upstreams[0].name=weather",
        "--set",
        "config.upstreams[0].url=http://weather.tools.svc:9000/mcp",
    ];
    let keys = [
        (
            "state-keys",
            "1:c2x1aWNlLWRlbW8tc3RhdGUta2V5LVJFUExBQ0UtTUU=",
        ),
        ("api-keys", &format!("{}=demo", "ab".repeat(32))),
    ];
    let theirs = Theirs::from([(
        "gw-keys".to_owned(),
        keys.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )]);
    let (r, config, _) = deployable("external Redis, existing Secret", &argv(&words), &theirs);
    assert_eq!(
        config["cluster"]["redis_url"].as_str(),
        Some("redis://redis.data.svc:6379/2"),
        "redis.externalUrl"
    );
    let redis = r
        .docs
        .iter()
        .filter(|(_, d)| d["metadata"]["labels"]["app.kubernetes.io/component"] == "redis")
        .count();
    assert_eq!(redis, 0, "no bundled Redis");
    assert_eq!(
        r.all("Secret").len(),
        1,
        "only the config Secret: the keys are the user's"
    );
}

#[test]
fn helm_chart_refuses_to_render_without_an_upstream_or_with_an_ambiguous_one() {
    let none = render(&argv(&KEYS)).err().expect("no upstream: refused");
    assert!(
        none.contains("config.upstreams needs at least one upstream"),
        "{none}"
    );
    let both = [
        &KEYS[..],
        &[
            "--set",
            "config.upstreams[0].name=x",
            "--set",
            "config.upstreams[0].url=http://x:1/mcp",
        ],
    ]
    .concat();
    let both = [
        &both[..],
        &["--set-json", r#"config.upstreams[0].command=["npx","x"]"#],
    ]
    .concat();
    let err = render(&argv(&both))
        .err()
        .expect("url and command: refused");
    assert!(
        err.contains("config.upstreams[0] needs either url"),
        "{err}"
    );
    let external = [
        &KEYS[..],
        &[
            "--set",
            "redis.enabled=false",
            "--set",
            "config.upstreams[0].name=x",
            "--set",
            "config.upstreams[0].url=http://x:1/mcp",
        ],
    ];
    let err = render(&argv(&external.concat()))
        .err()
        .expect("no Redis at all: refused");
    assert!(err.contains("redis.externalUrl is required"), "{err}");
}
