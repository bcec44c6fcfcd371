//! Sluice in front of the Python SDK's `simple-auth` example (issue 31): its authorization
//! server and its OAuth-protected MCP server, unmodified, installed by scripts/peers.sh
//! (`$SLUICE_SIMPLE_AUTH`), the upstream in `[upstream.auth] mode = "oauth"` with Sluice's
//! client registered there beforehand (`client_secret_post`), or registering itself (Dynamic
//! Client Registration) for the 2025-11-25 client's test. The driver
//! tests/conformance/simple_auth.py starts them and the `sluice` binary, signs users in at the
//! example's login page like a browser, and tells each step it checked on its stdout; these
//! tests run it and require every step, and fail when a peer is not installed.

use std::process::Command;

use crate::support::peers::peer_env;

/// Runs the driver with `args` (the scenario, then `dcr` for Sluice to register itself);
/// gives its exit status and its stdout and stderr.
fn run(args: &[&str]) -> (bool, String) {
    let bin = peer_env("SLUICE_SIMPLE_AUTH");
    let driver =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/simple_auth.py");
    let done = Command::new(bin.join("python"))
        .arg(driver)
        .args(args)
        .env("SLUICE_BIN", env!("CARGO_BIN_EXE_sluice"))
        .env("SLUICE_SIMPLE_AUTH", &bin)
        .output()
        .expect("run tests/conformance/simple_auth.py");
    let out = String::from_utf8_lossy(&done.stdout).into_owned();
    let err = String::from_utf8_lossy(&done.stderr);
    (done.status.success(), format!("{out}\n--- stderr\n{err}"))
}

fn assert_steps(ok: bool, out: &str, steps: &[&str]) {
    assert!(ok, "{out}");
    for step in steps {
        assert!(out.contains(step), "no {step:?} in:\n{out}");
    }
    assert!(
        out.contains("holds no code, token or client secret"),
        "{out}"
    );
}

#[test]
fn each_principal_reaches_simple_auth_with_their_own_token_and_carol_signs_in_first() {
    let (ok, out) = run(&["principals"]);
    assert_steps(
        ok,
        &out,
        &[
            "alice signed in and called get_time: the server saw 1 token",
            "bob signed in and called get_time: the server saw 1 token, not alice's",
            "carol without URL elicitation: -31040 with the URL, nothing reached the server",
            "carol signed in through get_time's sign-in round; its retry gave the time",
            "carol's retried call: the server saw a token neither alice's nor bob's",
            "alice and bob called again: the server saw each one's own token",
        ],
    );
}

#[test]
fn a_2025_11_25_client_signs_in_to_simple_auth_through_a_url_elicitation_of_bridge_b() {
    // Sluice registers itself there (Dynamic Client Registration).
    let (ok, out) = run(&["legacy", "dcr"]);
    assert_steps(
        ok,
        &out,
        &[
            "a 2025-11-25 client was sent elicitation/create in mode url, signed in, accepted",
            "its call of simple__get_time came back with the time; get_time is listed",
        ],
    );
}
