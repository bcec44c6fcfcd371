//! The shipped policy files (`policies/*.toml`): each loads through `sluice::policy::Rules::load`,
//! each says at its top what it does, and the rules they ship decide as their comments say. A copy
//! of one with a misspelled key is refused with the file and the line.

use std::path::{Path, PathBuf};

use serde_json::json;
use sluice::policy::{Effect, Rules, Subject};

fn policies_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies")
}

fn shipped() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(policies_dir())
        .expect("policies/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

fn load(name: &str) -> Rules {
    Rules::load(&[policies_dir().join(name)]).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn shape(method: &str, ask: &serde_json::Value) -> sluice::policy::shape::AskShape {
    sluice::policy::shape::AskShape::read(
        &sluice::mcp::method::Method::parse(method),
        Some(&ask.to_string()),
    )
    .expect("a well-formed ask")
}

fn sampling(ask: &sluice::policy::shape::AskShape) -> Subject<'_> {
    Subject {
        principal: "p",
        upstream: "u",
        method: "sampling/createMessage",
        tool: Some("t"),
        ask: Some(ask),
        ..Default::default()
    }
}

fn judge_sampling(r: &Rules, ask: serde_json::Value) -> sluice::policy::Decision {
    r.judge(&sampling(&shape("sampling/createMessage", &ask)))
}

fn tool_call(destructive: bool, read_only: bool) -> Subject<'static> {
    Subject {
        principal: "p",
        upstream: "u",
        method: "tools/call",
        tool: Some("t"),
        destructive,
        read_only,
        ..Default::default()
    }
}

#[test]
fn every_shipped_policy_loads_and_explains_itself_in_a_comment_at_its_top() {
    let files = shipped();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in ["default.toml", "permissive.toml", "strict.toml"] {
        assert!(
            names.iter().any(|n| n == want),
            "policies/{want} is missing: {names:?}"
        );
    }
    for f in &files {
        let rules = Rules::load(&[f]).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(!rules.is_empty(), "{} has no rules", f.display());
        let text = std::fs::read_to_string(f).unwrap();
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(
            header.len() >= 3,
            "{} does not open with a comment explaining it",
            f.display()
        );
    }
    // All of them at once, in order, as `--policy a --policy b` would load them.
    assert!(Rules::load(&files).is_ok());
}

#[test]
fn default_denies_context_and_large_asks_and_approves_tools_and_destructive_calls() {
    let r = load("default.toml");
    let judge = |ask: serde_json::Value| judge_sampling(&r, ask);
    let d = judge(json!({"maxTokens": 50, "includeContext": "thisServer"}));
    assert_eq!(
        (d.effect, d.rule.as_deref()),
        (Effect::Deny, Some("no-foreign-context"))
    );
    assert!(d.reason.is_some_and(|r| r.contains("includeContext")));
    assert_eq!(
        judge(json!({"maxTokens": 50, "includeContext": "allServers"})).effect,
        Effect::Deny
    );
    assert_eq!(
        judge(json!({"maxTokens": 50, "includeContext": "none"})).effect,
        Effect::Allow
    );
    assert_eq!(judge(json!({"maxTokens": 50})).effect, Effect::Allow);
    assert_eq!(
        judge(json!({"maxTokens": 4097})).rule.as_deref(),
        Some("max-tokens-4096")
    );
    assert_eq!(judge(json!({"maxTokens": 4096})).effect, Effect::Allow);
    assert_eq!(
        judge(json!({"maxTokens": 50, "tools": [{"name": "x"}]})).effect,
        Effect::Approve
    );
    assert_eq!(r.judge(&tool_call(true, false)).effect, Effect::Approve);
    assert_eq!(r.judge(&tool_call(false, false)).effect, Effect::Allow);
    let elicit = json!({"mode": "url", "url": "https://x.example/"});
    assert_eq!(
        r.judge(&Subject {
            method: "elicitation/create",
            ask: Some(&shape("elicitation/create", &elicit)),
            ..Default::default()
        })
        .effect,
        Effect::Allow
    );
}

#[test]
fn strict_approves_every_sampling_and_every_tool_not_read_only() {
    let r = load("strict.toml");
    let judge = |ask: serde_json::Value| judge_sampling(&r, ask).effect;
    assert_eq!(judge(json!({"maxTokens": 50})), Effect::Approve);
    assert_eq!(
        judge(json!({"maxTokens": 50, "tools": [{"name": "x"}]})),
        Effect::Deny
    );
    assert_eq!(judge(json!({"maxTokens": 2000})), Effect::Deny);
    assert_eq!(
        judge(json!({"maxTokens": 50, "includeContext": "thisServer"})),
        Effect::Deny
    );
    assert_eq!(r.judge(&tool_call(false, true)).effect, Effect::Allow);
    assert_eq!(r.judge(&tool_call(false, false)).effect, Effect::Approve);
    assert_eq!(
        r.judge(&tool_call(true, false)).rule.as_deref(),
        Some("approve-destructive-tools")
    );
    let url = json!({"mode": "url", "url": "https://x.example/"});
    assert_eq!(
        r.judge(&Subject {
            method: "elicitation/create",
            ask: Some(&shape("elicitation/create", &url)),
            ..Default::default()
        })
        .effect,
        Effect::Deny
    );
    let form = json!({"message": "m", "requestedSchema": {"type": "object"}});
    assert_eq!(
        r.judge(&Subject {
            method: "elicitation/create",
            ask: Some(&shape("elicitation/create", &form)),
            ..Default::default()
        })
        .effect,
        Effect::Allow
    );
}

#[test]
fn permissive_denies_only_the_context_of_all_servers() {
    let r = load("permissive.toml");
    let judge = |ask: serde_json::Value| judge_sampling(&r, ask).effect;
    assert_eq!(
        judge(json!({"maxTokens": 50, "includeContext": "allServers"})),
        Effect::Deny
    );
    assert_eq!(
        judge(json!({"maxTokens": 50, "includeContext": "thisServer"})),
        Effect::Allow
    );
    assert_eq!(
        judge(json!({"maxTokens": 100000, "tools": [{"name": "x"}]})),
        Effect::Allow
    );
    assert_eq!(r.judge(&tool_call(true, false)).effect, Effect::Allow);
}

/// Writes `text` as `name` in a scratch directory and loads it.
fn load_copy(name: &str, text: &str) -> Result<Rules, String> {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("policies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    Rules::load(&[&path])
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line holds {needle:?}"))
        + 1
}

#[test]
fn a_copy_of_a_shipped_policy_with_a_misspelled_key_is_refused_naming_its_file_and_line() {
    for (file, good, bad) in [
        ("default.toml", "include_context = [", "include_contxt = ["),
        ("strict.toml", "read_only = false", "readonly = false"),
        (
            "permissive.toml",
            "reason = \"servers may not",
            "reasn = \"servers may not",
        ),
    ] {
        let text = std::fs::read_to_string(policies_dir().join(file)).unwrap();
        assert!(
            text.contains(good),
            "{file} no longer holds {good:?}; update this test"
        );
        let broken = text.replacen(good, bad, 1);
        let line = line_of(&broken, bad);
        let err = match load_copy(file, &broken) {
            Ok(_) => panic!("a copy of {file} with {bad:?} loaded"),
            Err(e) => e,
        };
        // The refused word itself is not shown (issue 28 F7: a token pasted as a key never is),
        // the key it is closest to is.
        let (misspelled, meant) = (
            bad.split([' ', '=']).next().unwrap(),
            good.split([' ', '=']).next().unwrap(),
        );
        assert!(
            err.contains(&format!("{file}:{line}:")),
            "{file}: the error should name line {line}: {err}"
        );
        assert!(
            err.contains(&format!("did you mean `{meant}`")),
            "{file}: the error should suggest {meant:?}: {err}"
        );
        assert!(
            !err.contains(misspelled),
            "{file}: the refused word was printed: {err}"
        );
    }
}

#[test]
fn an_unknown_effect_in_a_copy_is_refused_naming_its_line() {
    let text = std::fs::read_to_string(policies_dir().join("default.toml")).unwrap();
    let broken = text.replacen("effect = \"approve\"", "effect = \"maybe\"", 1);
    let line = line_of(&broken, "effect = \"maybe\"");
    let err = load_copy("default-effect.toml", &broken)
        .err()
        .expect("an unknown effect is refused");
    assert!(
        err.contains(&format!("default-effect.toml:{line}:"))
            && err.contains("expected one of `allow`"),
        "{err}"
    );
    assert!(
        !err.contains("maybe"),
        "the refused value was printed: {err}"
    );
}

#[test]
fn a_missing_policy_file_is_refused_naming_it() {
    let err = Rules::load(&[Path::new("policies/no-such.toml")])
        .err()
        .expect("a missing file is refused");
    assert!(err.contains("no-such.toml"), "{err}");
}

#[test]
fn sluice_check_loads_the_policies_and_refuses_a_broken_one_naming_its_line() {
    let sluice = env!("CARGO_BIN_EXE_sluice");
    let good = policies_dir().join("default.toml");
    let out = std::process::Command::new(sluice)
        .args([
            "check",
            "--upstream",
            "demo=http://127.0.0.1:9/mcp",
            "--policy",
        ])
        .arg(&good)
        .output()
        .expect("run sluice check");
    assert!(
        out.status.success(),
        "sluice check refused the shipped default policy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("default.toml"),
        "the effective config lists the policy file"
    );

    let text = std::fs::read_to_string(&good).unwrap().replacen(
        "tools_present = true",
        "tools_presnt = true",
        1,
    );
    let line = line_of(&text, "tools_presnt");
    load_copy("check-broken.toml", &text)
        .err()
        .expect("the broken copy is refused");
    let broken = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("policies-{}", std::process::id()))
        .join("check-broken.toml");
    let out = std::process::Command::new(sluice)
        .args([
            "check",
            "--upstream",
            "demo=http://127.0.0.1:9/mcp",
            "--policy",
        ])
        .arg(&broken)
        .output()
        .expect("run sluice check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "sluice check accepted a broken policy file"
    );
    assert!(
        stderr.contains(&format!("check-broken.toml:{line}:"))
            && stderr.contains("did you mean `tools_present`"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("tools_presnt"),
        "the refused word was printed: {stderr}"
    );
}

#[test]
fn the_commented_team_scoped_example_in_the_default_policy_loads_and_hides_as_it_says() {
    use sluice::policy::visibility::{Listed, Viewer};
    use sluice::route::table::{ListKind, ToolHints};
    let text = std::fs::read_to_string(policies_dir().join("default.toml")).unwrap();
    let example: String = text
        .lines()
        .skip_while(|l| !l.starts_with("# Team-scoped visibility"))
        .filter_map(|l| l.strip_prefix("# ").or_else(|| (l == "#").then_some("")))
        .filter(|l| {
            ["[[rule]]", "name = ", "match = ", "effect = "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let rules = Rules::parse(&example, "default.toml (example)")
        .unwrap_or_else(|e| panic!("{e}\n{example}"));
    assert_eq!(rules.len(), 3, "{example}");
    let tool = |key| Listed {
        kind: ListKind::Tools,
        key,
        hints: ToolHints::default(),
    };
    let (platform, interns) = (vec!["platform".to_owned()], vec!["interns".to_owned()]);
    assert!(rules.shows(
        &Viewer {
            principal: "p",
            groups: &platform
        },
        "ops",
        &tool("admin_reset")
    ));
    assert!(!rules.shows(
        &Viewer {
            principal: "p",
            groups: &interns
        },
        "ops",
        &tool("admin_reset")
    ));
    assert!(!rules.shows(
        &Viewer {
            principal: "p",
            groups: &interns
        },
        "ledger",
        &tool("balance")
    ));
    assert!(rules.shows(
        &Viewer {
            principal: "p",
            groups: &[]
        },
        "ledger",
        &tool("balance")
    ));
}
