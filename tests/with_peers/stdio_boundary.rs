//! The boundary between Sluice and the stdio servers it starts (issue 28), with the `sluice`
//! binary as a real process and `tests/peers/hostile_boundary.py` as the server:
//!
//! - class 1: a server under Sluice's own (non-root) uid cannot read Sluice's environment or
//!   memory nor ptrace it (Sluice is non-dumpable); one given `user` runs as that user, with its
//!   home and no group of root's; `sluice check` refuses a user Sluice cannot switch to and
//!   warns of a server left running as root; a server gets none of the capabilities Sluice was
//!   started with (ambient ones included: `setpriv --ambient-caps`), gains none by exec
//!   (`no_new_privs`), so it cannot become root and read Sluice; and a user Sluice could not
//!   end the processes of (no CAP_KILL) is refused (class 6);
//! - class 6: no process a server detaches (setsid, a double fork) outlives the server or
//!   Sluice: not while the server runs, not when it crashes, not when its session is closed,
//!   not at SIGTERM; one Sluice may not signal (root without CAP_KILL, an orphan of another
//!   uid) is logged by pid;
//! - a reload that replaces the upstream ends the spare processes it started with the old
//!   settings at once (with its idle sessions), not when the old generation has drained.
//!
//! This machine's tests run as root without Yama: Sluice is then started as nobody (65534), so
//! that a server under the same non-root uid is stopped by nothing but Sluice being non-dumpable.

use std::path::Path;

use base64::Engine;
use serde_json::{json, Value};

use super::stdio::processes_with;
use crate::support::call::{http, Call};
use crate::support::gateway::{Gateway, Upstream};
use crate::support::peers::{self, script};
use crate::support::process::{check, Env, Sluice};

const NOBODY: u32 = 65534;
const STATE_KEY_ENV: &str = "SLUICE_BOUNDARY_STATE_KEYS";
const TOKEN_ENV: &str = "SLUICE_BOUNDARY_OTHER_TOKEN";

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A Python any user can run (a pyenv shim under /root is not one).
fn python() -> String {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
    .to_owned()
}

/// The hostile server as upstream `b`, its processes marked by `token`.
fn boundary(token: &str) -> Upstream {
    Upstream::stdio(
        "b",
        &[
            python(),
            script("hostile_boundary.py").display().to_string(),
            token.to_owned(),
        ],
    )
    .key("spare_processes", 0)
    .key("era", "2025-11-25")
}

/// Sluice with `up`, its state keys in the environment and a second (HTTP) upstream whose
/// bearer token is in the environment too.
fn config(up: Upstream, gw: Gateway) -> String {
    let other = Upstream::new("other", "http://127.0.0.1:1/mcp").key("bearer_token_env", TOKEN_ENV);
    gw.timeouts(&[
        ("connect_ms", 300),
        ("response_ms", 10_000),
        ("refresh_ms", 600_000),
        ("shutdown_ms", 2000),
    ])
    .set("state", "key_env", STATE_KEY_ENV)
    .upstream_spec(up)
    .upstream_spec(other)
    .text()
}

/// Sluice's secrets (a state key, another upstream's token) in its environment; gives them too.
fn secrets() -> (Env, [String; 2]) {
    let key = base64::engine::general_purpose::STANDARD
        .encode(format!("{:x<32}", crate::support::unique("sk")).as_bytes());
    let token = crate::support::unique("other-token");
    (
        Env::new()
            .set(STATE_KEY_ENV, &format!("1:{key}"))
            .set(TOKEN_ENV, &token),
        [key, token],
    )
}

/// The hostile server's answer to `tool`, as JSON.
async fn call(sluice: &Sluice, tool: &str) -> Value {
    let text = Call::new(&format!("b__{tool}"), json!({}))
        .caps(json!({}))
        .send(&http(), &sluice.url(), json!({}))
        .await
        .text();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool} answered non-JSON ({e}): {text}"))
}

/// Kills whatever still carries `marker` when the test ends (a failing run must not leave
/// an hour-long sleeper behind).
struct Leftovers(String);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in processes_with(&self.0) {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status();
        }
    }
}

/// Asserts each attempt on Sluice failed, and no secret appears in what the server saw.
fn assert_shut_out(spy: &Value, attempts: &[&str], secrets: &[String]) {
    for a in attempts {
        assert!(
            spy[a].get("err").is_some(),
            "the server's {a} attempt on Sluice succeeded: {spy:#}"
        );
    }
    for s in secrets {
        assert!(
            !spy.to_string().contains(s.as_str()),
            "a secret of Sluice's reached the server: {spy:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_under_sluices_own_uid_cannot_read_its_environment_or_memory_nor_ptrace_it()
{
    let token = crate::support::unique("spy");
    let _left = Leftovers(token.clone());
    let (env, secrets) = secrets();
    // As root, Sluice runs as nobody: its server is then the same non-root uid.
    let env = if is_root() {
        env.run_as(NOBODY, NOBODY)
    } else {
        env
    };
    let sluice = Sluice::start_env(&config(boundary(&token), Gateway::new()), &env).await;
    let spy = call(&sluice, "spy").await;
    assert_eq!(
        spy["ppid"],
        json!(sluice.pid),
        "the server is Sluice's child: {spy:#}"
    );
    let uid = if is_root() {
        NOBODY
    } else {
        nix::unistd::geteuid().as_raw()
    };
    assert_eq!(
        spy["uid"],
        json!(uid),
        "the server runs as Sluice's own uid, not root's: {spy:#}"
    );
    assert_shut_out(&spy, &["environ", "mem", "ptrace"], &secrets);
    // It holds none of Sluice's descriptors (its listener, its connections): its stdio, and the
    // one listing them.
    assert_eq!(spy["fds"], json!([0, 1, 2, 3]), "{spy:#}");
    sluice.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_given_a_user_runs_as_it_with_its_home_and_no_group_of_roots() {
    let token = crate::support::unique("user");
    let _left = Leftovers(token.clone());
    let cwd = peers::scratch().join("boundary-cwd");
    std::fs::create_dir_all(&cwd).expect("a working directory");
    let env = toml::Value::Table(toml::map::Map::from_iter([(
        "SET_BY_CONFIG".to_owned(),
        toml::Value::from("yes"),
    )]));
    let up = boundary(&token)
        .key("user", "nobody")
        .key("cwd", cwd.display().to_string())
        .key("env", env);
    let (env, secrets) = secrets();
    if !is_root() {
        // Sluice cannot switch: refused at startup, saying why.
        let e = Sluice::spawn(&config(up, Gateway::new()), &env)
            .await
            .err()
            .expect("refused");
        assert!(
            e.code == Some(2) && e.output.contains("without CAP_SETUID and CAP_SETGID"),
            "{}",
            e.output
        );
        return;
    }
    let sluice = Sluice::start_env(&config(up, Gateway::new()), &env).await;
    let spy = call(&sluice, "spy").await;
    assert_eq!(
        (&spy["uid"], &spy["gid"], &spy["groups"]),
        (&json!(NOBODY), &json!(NOBODY), &json!([])),
        "{spy:#}"
    );
    assert_eq!(
        (&spy["home"], &spy["user"]),
        (&json!("/nonexistent"), &json!("nobody")),
        "nobody's own: {spy:#}"
    );
    assert_eq!(spy["cwd"], json!(cwd.display().to_string()), "{spy:#}");
    // Nor can it signal Sluice (root), unlike a server under Sluice's own uid.
    assert_shut_out(&spy, &["environ", "mem", "ptrace", "signal"], &secrets);
    sluice.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_check_refuses_a_user_it_cannot_switch_to_and_warns_of_a_server_left_as_root() {
    let up = || Upstream::stdio("b", &["true"]);
    let (env, _) = secrets();
    let unprivileged = if is_root() {
        env.clone().run_as(NOBODY, NOBODY)
    } else {
        env.clone()
    };
    let run = check(
        &config(up().key("user", "root"), Gateway::new()),
        &unprivileged,
    )
    .await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("upstream 'b': user = \"root\" (uid 0)")
            && run.stderr.contains("without CAP_SETUID"),
        "{}",
        run.stderr
    );
    let as_is = check(&config(up(), Gateway::new()), &env).await;
    assert_eq!(as_is.code, Some(0), "{}", as_is.stderr);
    assert_eq!(
        as_is
            .stderr
            .contains("stdio upstream's processes run as root"),
        is_root(),
        "{}",
        as_is.stderr
    );
    if is_root() {
        let given = check(
            &config(up().key("user", NOBODY as i64), Gateway::new()),
            &env,
        )
        .await;
        assert_eq!(given.code, Some(0), "{}", given.stderr);
        assert!(!given.stderr.contains("run as root"), "{}", given.stderr);
    }
}

/// Whether the hostile server of `token` runs.
fn server_runs(token: &str) -> bool {
    // Its argv: the script, then the token (NUL-separated in /proc/<pid>/cmdline).
    !processes_with(&format!("hostile_boundary.py\0{token}")).is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_grandchild_is_ended_while_its_server_runs_and_nothing_outlives_sigterm() {
    let token = crate::support::unique("detach");
    let _left = Leftovers(token.clone());
    let (env, _) = secrets();
    let sluice = Sluice::start_env(&config(boundary(&token), Gateway::new()), &env).await;
    let orphan = call(&sluice, "detach").await;
    let session = call(&sluice, "session").await;
    assert!(orphan.is_u64() && session.is_u64(), "{orphan} {session}");
    // Its parent exited at once: an orphan, ended though its server runs on.
    crate::support::eventually("the detached grandchild was ended", || {
        processes_with(&format!("orphan:{token}")).is_empty()
    })
    .await;
    assert!(server_runs(&token), "the server itself runs on");
    assert_eq!(
        processes_with(&format!("session:{token}")).len(),
        1,
        "a child its server still holds runs on"
    );
    let out = sluice.terminate().await;
    assert!(
        out.contains("ended processes a stdio server left behind"),
        "{out}"
    );
    assert_eq!(
        processes_with(&token),
        Vec::<u32>::new(),
        "processes left after SIGTERM:\n{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_crashed_stdio_server_left_is_ended_and_sluice_serves_on() {
    let token = crate::support::unique("crash");
    let _left = Leftovers(token.clone());
    let (env, _) = secrets();
    let sluice = Sluice::start_env(&config(boundary(&token), Gateway::new()), &env).await;
    call(&sluice, "session").await;
    assert_eq!(processes_with(&format!("session:{token}")).len(), 1);
    let crashed = Call::new("b__crash", json!({}))
        .caps(json!({}))
        .send(&http(), &sluice.url(), json!({}))
        .await;
    assert!(crashed.status >= 500, "{crashed:?}");
    crate::support::eventually("the crashed server's child was ended", || {
        processes_with(&format!("session:{token}")).is_empty()
    })
    .await;
    // A new process serves the next call.
    assert!(call(&sluice, "spy").await["ppid"] == json!(sluice.pid));
    sluice.terminate().await;
    assert_eq!(processes_with(&token), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_stdio_server_left_is_ended_with_its_idle_session() {
    let token = crate::support::unique("idle");
    let _left = Leftovers(token.clone());
    let (env, _) = secrets();
    let gw = Gateway::new().set("bridge", "session_idle_ms", 300);
    let sluice = Sluice::start_env(&config(boundary(&token), gw), &env).await;
    call(&sluice, "session").await;
    assert_eq!(processes_with(&format!("session:{token}")).len(), 1);
    // An idle session is ended: its process, and what that left.
    crate::support::eventually("the idle server's child was ended", || {
        processes_with(&format!("session:{token}")).is_empty()
    })
    .await;
    sluice.terminate().await;
    assert_eq!(processes_with(&token), Vec::<u32>::new());
}

/// Sluice as nobody, given `caps` (e.g. `+setuid,+setgid,+kill`: with CAP_KILL only may it run a
/// server as another user) as inheritable and ambient capabilities, as systemd's
/// `AmbientCapabilities=` or this `setpriv` gives them, with `env`'s variables.
fn ambient(env: Env, caps: &str) -> Env {
    let (inh, amb) = (
        format!("--inh-caps={caps}"),
        format!("--ambient-caps={caps}"),
    );
    let args = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        inh.as_str(),
        amb.as_str(),
    ];
    env.setpriv(&args)
}

/// Another user than Sluice's (no entry needed with a group).
fn other_user(up: Upstream) -> Upstream {
    up.key("user", 4242).key("group", 4242)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_gets_no_capability_sluice_was_started_with_and_cannot_become_root_to_read_it(
) {
    let token = crate::support::unique("caps");
    let _left = Leftovers(token.clone());
    let (plain, secrets) = secrets();
    // As root: the reviewer's launch (Sluice non-root with ambient capabilities, its server as
    // another user; CAP_NET_RAW one it does not need); otherwise Sluice's own uid, whatever it holds.
    let (up, env) = if is_root() {
        (
            other_user(boundary(&token)),
            ambient(plain, "+setuid,+setgid,+kill,+net_raw"),
        )
    } else {
        (boundary(&token), plain)
    };
    let cfg = config(up, Gateway::new());
    let sluice = Sluice::start_env(&cfg, &env).await;
    let got = call(&sluice, "escalate").await;
    let none = json!("0000000000000000");
    for set in ["CapAmb", "CapEff", "CapPrm", "CapInh"] {
        assert_eq!(
            got["status"][set], none,
            "the server holds no capability ({set}): {got:#}"
        );
    }
    assert_eq!(
        got["status"]["NoNewPrivs"],
        json!("1"),
        "nor can it gain one by exec: {got:#}"
    );
    // On main: the server held CAP_SETUID (ambient): setgid(0), setuid(0), then `cat` as root
    // read Sluice's environment.
    assert_shut_out(&got, &["setuid", "environ"], &secrets);
    let out = sluice.terminate().await;
    if is_root() {
        let cleared = "Sluice was started with CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_NET_RAW in its ambient or inheritable set";
        let unneeded = "does not need: CAP_NET_RAW;";
        let warned: Vec<&str> = out.lines().filter(|l| l.contains(cleared)).collect();
        assert_eq!(warned.len(), 1, "startup says once what it cleared:\n{out}");
        assert!(
            warned[0].contains(unneeded),
            "and what it holds beyond what the config needs:\n{out}"
        );
        let run = check(&cfg, &env).await;
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(
            run.stderr.contains(cleared) && run.stderr.contains(unneeded),
            "and so does sluice check:\n{}",
            run.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_sluice_could_not_end_the_processes_of_is_refused_at_startup_and_by_check() {
    if !is_root() {
        return; // Without root no capability can be given to Sluice here; the unit tests cover the rule.
    }
    let cfg = config(other_user(Upstream::stdio("b", &["true"])), Gateway::new());
    // CAP_SETUID and CAP_SETGID, no CAP_KILL: on main it started, and its servers' orphans
    // outlived it (kill: EPERM).
    let env = ambient(secrets().0, "+setuid,+setgid");
    let e = Sluice::spawn(&cfg, &env).await.err().expect("refused");
    assert!(
        e.code == Some(2)
            && e.output
                .contains("upstream 'b': user = \"4242\" (uid 4242)")
            && e.output.contains("without CAP_KILL"),
        "{}",
        e.output
    );
    let run = check(&cfg, &env).await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("without CAP_KILL"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_replaces_a_stdio_upstream_ends_its_old_spares_at_once() {
    let (old, new) = (
        crate::support::unique("gen-old"),
        crate::support::unique("gen-new"),
    );
    let (_left_old, _left_new) = (Leftovers(old.clone()), Leftovers(new.clone()));
    let (env, _) = secrets();
    // The old generation drains for request_ms (its calls in flight finish): far past the wait.
    let with = |token: &str| {
        config(
            boundary(token).key("spare_processes", 2),
            Gateway::new().timeouts(&[("request_ms", 600_000)]),
        )
    };
    let sluice = Sluice::start_env(&with(&old), &env).await;
    call(&sluice, "spy").await;
    // The session that served the call and the two spares started after it.
    crate::support::eventually("a session and two spares run", || {
        processes_with(&old).len() >= 3
    })
    .await;
    // Replaced (its command changed; a `user` or `env` change is the same): on main its spares,
    // started with the old settings, lived on until the drain ended.
    std::fs::write(sluice.config_path(), with(&new)).expect("edit the config");
    sluice.signal("HUP").await;
    sluice.logged("config reloaded", 1).await;
    crate::support::eventually("the old generation's processes ended", || {
        processes_with(&old).is_empty()
    })
    .await;
    // The new generation serves.
    assert_eq!(call(&sluice, "spy").await["ppid"], json!(sluice.pid));
    assert!(!processes_with(&new).is_empty(), "the new command runs");
    sluice.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_sluice_may_not_signal_is_logged_by_pid_without_content() {
    if !is_root() {
        return; // Only root can make a process of another uid here.
    }
    let token = crate::support::unique("eperm");
    let _left = Leftovers(token.clone());
    // Root without CAP_KILL (a container's --cap-drop=KILL): its server runs as root too, and
    // can leave a process of another uid that Sluice may not signal.
    let env = secrets()
        .0
        .setpriv(&["--bounding-set=-kill", "--inh-caps=-all"]);
    let sluice = Sluice::start_env(&config(boundary(&token), Gateway::new()), &env).await;
    let orphan = call(&sluice, "detach_as").await;
    assert!(orphan.is_u64(), "{orphan}");
    // On main the reaper's kill failed (EPERM) and nothing said so.
    sluice
        .logged("a process a stdio server started could not be ended", 1)
        .await;
    let out = sluice.output();
    let line = out
        .lines()
        .find(|l| l.contains("could not be ended"))
        .expect("the line");
    assert!(
        line.contains(&format!("pid={orphan}"))
            && line.contains("CAP_KILL")
            && !line.contains(&token),
        "{line}"
    );
    sluice.terminate().await;
}
