//! Sluice as an OAuth client of its upstreams (issue 31), against the official conformance
//! suite's authorization scenarios: the suite runs an MCP server and its authorization server,
//! and its client command starts the `sluice` binary in front of them and calls a tool through
//! it: tests/conformance/oauth_client_credentials.py for Sluice's own identity
//! (`mode = "client_credentials"`), tests/conformance/oauth_user.py for each user's
//! (`mode = "oauth"`: the user signs in through a URL elicitation the driver follows).

use std::path::Path;
use std::process::Command;

use crate::support::peers::peer_env;

/// Runs `scenario` with Sluice as the client (`extra`: more arguments, `env`: more variables);
/// gives the suite's exit status and every check's `id STATUS`.
fn run(scenario: &str, extra: &[&str], env: &[(&str, &str)]) -> (bool, Vec<String>, String) {
    let args = [&["--scenario", scenario][..], extra].concat();
    run_driver("oauth_client_credentials.py", &args, env)
}

/// Runs the suite with `args` and the client command `driver` (in tests/conformance).
fn run_driver(driver: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, Vec<String>, String) {
    let out = tempfile_dir();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(driver);
    let mut cmd = Command::new(peer_env("SLUICE_NODE22"));
    cmd.arg(peer_env("SLUICE_CONFORMANCE"))
        .args([
            "client",
            "--command",
            &format!("python3 {}", driver.display()),
        ])
        .arg("-o")
        .arg(&out)
        .args(args)
        .env("SLUICE_BIN", env!("CARGO_BIN_EXE_sluice"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let done = cmd.output().expect("run the conformance suite");
    let mut checks = Vec::new();
    let mut stdout = String::new();
    // One folder per run, under the scenario's name (`auth/…`).
    let mut dirs = vec![out.clone()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).expect("the suite's output folder") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "checks.json") {
                let text = std::fs::read_to_string(&p).expect("checks.json");
                let parsed: serde_json::Value = serde_json::from_str(&text).expect("JSON");
                for c in parsed.as_array().expect("a list of checks") {
                    let (id, status) = (c["id"].as_str(), c["status"].as_str());
                    checks.push(format!("{} {}", id.unwrap_or("?"), status.unwrap_or("?")));
                }
                stdout += &std::fs::read_to_string(dir.join("stdout.txt")).unwrap_or_default();
            }
        }
    }
    assert!(
        !checks.is_empty(),
        "the suite wrote no checks under {}",
        out.display()
    );
    let _ = std::fs::remove_dir_all(&out);
    (done.status.success(), checks, stdout)
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "sluice-conf-auth-{}-{}",
        std::process::id(),
        crate::support::unique("run")
    ));
    std::fs::create_dir_all(&d).expect("a temporary folder");
    d
}

fn bad(checks: &[String]) -> Vec<&String> {
    checks
        .iter()
        .filter(|c| c.ends_with(" FAILURE") || c.ends_with(" WARNING"))
        .collect()
}

#[test]
fn the_client_credentials_scenario_passes_with_sluice_as_the_client_on_both_wires() {
    // The scenario's server speaks 2025-11-25 by default and 2026-07-28 when asked (the
    // scenario is an extension, off the spec's timeline: `--force`).
    for extra in [&[][..], &["--spec-version", "2026-07-28", "--force"][..]] {
        let (ok, checks, stdout) = run("auth/client-credentials-basic", extra, &[]);
        assert!(
            ok && bad(&checks).is_empty(),
            "{extra:?}: {checks:?}\n{stdout}"
        );
        for want in [
            "prm-pathbased-requested SUCCESS",
            "authorization-server-metadata SUCCESS",
            "client-credentials-basic-auth SUCCESS",
            "valid-bearer-token SUCCESS",
        ] {
            assert!(
                checks.iter().any(|c| c == want),
                "{extra:?}: no {want}: {checks:?}"
            );
        }
        assert!(stdout.contains("holds no credential"), "{stdout}");
    }
}

#[test]
fn the_private_key_jwt_scenario_passes_with_sluice_signing_the_client_assertion() {
    let (ok, checks, stdout) = run("auth/client-credentials-jwt", &[], &[]);
    assert!(ok && bad(&checks).is_empty(), "{checks:?}\n{stdout}");
    for want in [
        "client-credentials-jwt-verified SUCCESS",
        "valid-bearer-token SUCCESS",
    ] {
        assert!(checks.iter().any(|c| c == want), "no {want}: {checks:?}");
    }
    // The key's PEM is not in Sluice's trace log.
    assert!(stdout.contains("holds no credential"), "{stdout}");
}

#[test]
fn a_refused_client_secret_is_told_by_its_oauth_error_and_never_printed() {
    let (ok, checks, stdout) = run(
        "auth/client-credentials-basic",
        &[],
        &[("SLUICE_AUTH_WRONG_SECRET", "1")],
    );
    // The suite fails the run: its authorization server saw wrong credentials, as it should.
    assert!(!ok, "{checks:?}");
    assert_eq!(
        bad(&checks),
        ["client-credentials-basic-auth FAILURE"],
        "{checks:?}"
    );
    assert!(
        stdout.contains("refused as expected: invalid_client"),
        "{stdout}"
    );
}

/// The suite's authorization scenarios of its `auth` suite (the same fourteen on both
/// versions).
const AUTH_SUITE: usize = 14;

/// The `auth/*` scenarios of the 2026-07-28 version beyond the `auth` suite's.
const AUTH_2026: [&str; 11] = [
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// Every scenario's run: how many scenarios wrote checks, and the checks that did not pass.
fn user_runs(args: &[&str]) -> (bool, Vec<String>, String) {
    run_driver("oauth_user.py", args, &[])
}

#[test]
fn every_auth_scenario_of_the_auth_suite_passes_with_each_user_signing_in_through_sluice() {
    for version in ["2025-11-25", "2026-07-28"] {
        let (ok, checks, stdout) = user_runs(&["--suite", "auth", "--spec-version", version]);
        assert!(
            ok && bad(&checks).is_empty(),
            "{version}: {:?}\n{stdout}",
            bad(&checks)
        );
        let signed = stdout.matches("Signed in to scenario").count();
        assert!(
            signed >= AUTH_SUITE - 1,
            "{version}: {signed} sign-ins\n{stdout}"
        );
        for want in [
            "pkce-s256-method-used SUCCESS",
            "pkce-verifier-matches-challenge SUCCESS",
            "resource-parameter-matches-prm SUCCESS",
            "client-registration SUCCESS",
            "scope-step-up-escalation SUCCESS",
            "scope-retry-limit SUCCESS",
            "valid-bearer-token SUCCESS",
        ] {
            assert!(checks.iter().any(|c| c == want), "{version}: no {want}");
        }
        // A client without URL elicitation is told the URL (-31040); a decline is -31041.
        assert!(
            stdout.contains("without URL elicitation: -31040 with the URL; declined: -31041"),
            "{version}: {stdout}"
        );
        // The audit records say a sign-in was asked, and of which mode (never a token).
        assert_eq!(
            stdout
                .matches(" sign-in records, upstream_auth oauth")
                .count(),
            AUTH_SUITE,
            "{version}: {stdout}"
        );
        // No token, code, verifier or secret in any of Sluice's trace logs.
        assert!(!stdout.contains("holds a credential"), "{stdout}");
        assert_eq!(
            stdout.matches("holds no credential").count(),
            AUTH_SUITE,
            "{version}: {stdout}"
        );
    }
}

#[test]
fn every_2026_auth_scenario_beyond_the_suite_and_the_2025_03_26_fallbacks_pass() {
    let mut runs: Vec<Vec<&str>> = AUTH_2026
        .iter()
        .map(|s| vec!["--scenario", *s, "--spec-version", "2026-07-28"])
        .collect();
    for s in [
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
    ] {
        runs.push(vec!["--scenario", s]);
    }
    for args in runs {
        let (ok, checks, stdout) = user_runs(&args);
        assert!(
            ok && bad(&checks).is_empty(),
            "{args:?}: {checks:?}\n{stdout}"
        );
        assert!(!stdout.contains("holds a credential"), "{args:?}: {stdout}");
    }
}

#[test]
fn the_sign_in_tool_and_the_upstreams_own_tools_carry_its_prefix_when_names_are_prefixed() {
    let args = [
        "--scenario",
        "auth/metadata-default",
        "--spec-version",
        "2026-07-28",
    ];
    let (ok, checks, stdout) = run_driver("oauth_user.py", &args, &[("SLUICE_PREFIX", "always")]);
    assert!(ok && bad(&checks).is_empty(), "{checks:?}\n{stdout}");
    assert!(
        stdout.contains(
            "called scenario__test-tool through Sluice as the signed-in user (signed in with scenario__sluice_sign_in)"
        ),
        "{stdout}"
    );
}
