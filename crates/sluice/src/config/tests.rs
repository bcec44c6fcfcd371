//! The loader's tests: what a file or a flag is refused with (the exact message, with the file
//! and the line), what each section defaults to, and that the printed config loads back. The
//! upstreams' own tests (`[[upstream]]`, `--upstream`, stdio) are in `upstream_tests.rs`.

use std::time::Duration;

use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "sluice.toml", &Overrides::default())
}

fn refused(text: &str) -> String {
    load(text).unwrap_err().0
}

#[test]
fn an_unknown_key_is_refused_with_file_and_line() {
    let err = load("listen = \"127.0.0.1:1\"\n\n[limits]\nmax_bodybytes = 3\n")
        .unwrap_err()
        .0;
    assert!(err.starts_with("sluice.toml:4:"), "{err}");
    assert!(
        err.contains("did you mean `max_body_bytes`?") && !err.contains("max_bodybytes"),
        "{err}"
    );
}

#[test]
fn defaults_listen_on_loopback_and_flags_add_upstreams() {
    let over = Overrides {
        upstreams: vec!["a=http://127.0.0.1:9/mcp".into()],
        ..Default::default()
    };
    let c = Config::from_toml("", "x", &over).unwrap();
    assert!(c.listen.ip().is_loopback());
    assert_eq!(c.upstreams[0].name, "a");
    assert!(!c.prefixed());
    assert_eq!(c.limits.max_body_bytes, 4 << 20);
}

#[test]
fn secrets_are_redacted_when_printed() {
    let c =
        load("[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer s3cret\" }\n").unwrap();
    assert!(!c.redacted().contains("s3cret"));
    assert!(!format!("{c:?}").contains("s3cret"));
    let c = load("[[upstream]]\nname = \"a\"\nurl = \"http://user:pa55word@127.0.0.1:1/mcp?token=t0ken&x=1#f\"\n").unwrap();
    let printed = c.redacted();
    for secret in ["pa55word", "user:", "t0ken"] {
        assert!(
            !printed.contains(secret) && !format!("{c:?}").contains(secret),
            "{secret} in {printed}"
        );
    }
    assert!(
        printed.contains("http://redacted@127.0.0.1:1/mcp?token=redacted&x=redacted#redacted"),
        "{printed}"
    );
    let odd = super::redact_url("http://h/a;jsessionid=j5e55/b?s3cret#access_token=t0k");
    assert_eq!(odd, "http://h/a;jsessionid=redacted/b?redacted#redacted");
    let auth = load("[auth]\nresource = \"https://u:pa55@gw/mcp?k=v\"\nauthorization_servers = [\"https://as/?c=s3\"]\n[[auth.api_keys]]\nsha256 = \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"\nprincipal = \"p\"\n").unwrap();
    let printed = auth.redacted();
    assert!(
        !printed.contains("pa55") && !printed.contains("s3") && !printed.contains("k=v"),
        "{printed}"
    );
    let empty =
        load("[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer \" }\n").unwrap_err().0;
    assert!(
        empty.contains("header \"Authorization\" is empty"),
        "{empty}"
    );
    Config::from_toml(&printed, "printed", &Overrides::default())
        .expect("the printed config loads again");
    let e = load("[[upstream]]\nname = \"a\"\nurl = \"ftp://u:pa55word@h/mcp\"\n")
        .unwrap_err()
        .0;
    assert!(!e.contains("pa55word"), "{e}");
}

#[test]
fn the_printed_effective_config_loads_back_unchanged() {
    let c = Config::from_toml(
        "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n[timeouts]\nconnect_ms = 7\n",
        "x",
        &Overrides::default(),
    )
    .unwrap();
    let printed = c.redacted();
    let again = Config::from_toml(&printed, "printed", &Overrides::default()).unwrap();
    assert_eq!(again.redacted(), printed);
    assert_eq!(again.timeouts.connect, Duration::from_millis(7));
}

// === top-level keys and flags ===

#[test]
fn listen_must_be_ip_and_port_and_the_flag_overrides_the_file() {
    assert_eq!(
        refused("listen = \"nope\"\n"),
        "sluice.toml: listen = \"nope\": expected IP:PORT, e.g. 127.0.0.1:8080"
    );
    let over = Overrides {
        listen: Some("127.0.0.1:9".into()),
        ..Default::default()
    };
    let c = Config::from_toml("listen = \"nope\"\n", "sluice.toml", &over).unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:9");
}

#[test]
fn the_separator_and_the_path_are_checked() {
    assert_eq!(
        refused("separator = \"::\"\n"),
        "sluice.toml: separator = \"::\": expected one or more of [A-Za-z0-9_.-]"
    );
    assert_eq!(
        refused("separator = \"\"\n"),
        "sluice.toml: separator = \"\": expected one or more of [A-Za-z0-9_.-]"
    );
    assert_eq!(
        refused("path = \"mcp\"\n"),
        "sluice.toml: path = \"mcp\": expected an absolute path such as \"/mcp\""
    );
    let c = load("separator = \"-\"\npath = \"/x\"\n").unwrap();
    assert_eq!((c.separator.as_str(), c.path.as_str()), ("-", "/x"));
}

#[test]
fn quick_flags_set_the_prefix_and_append_policies() {
    let over = Overrides {
        no_prefix: true,
        policies: vec!["b.toml".into()],
        ..Default::default()
    };
    let c =
        Config::from_toml("prefix = \"always\"\npolicies = [\"a.toml\"]\n", "x", &over).unwrap();
    assert_eq!(c.prefix, PrefixMode::Never);
    assert_eq!(c.policies, ["a.toml", "b.toml"]);
    assert_eq!(load("").unwrap().prefix, PrefixMode::Auto);
}

// === [budget] ===

#[test]
fn a_budget_override_needs_an_upstream_or_a_group() {
    let err = refused("[[budget.override]]\nmax_rounds = 2\n");
    assert_eq!(
        err,
        "sluice.toml: a [[budget.override]] needs an upstream or a group"
    );
}

#[test]
fn a_budget_override_starts_from_the_global_limits() {
    let c = load("[budget]\nmax_rounds = 3\nwindow_ms = 500\n[[budget.override]]\ngroup = \"g\"\nsampling_burst = 1\n").unwrap();
    assert_eq!(
        (
            c.budget.max_rounds,
            c.budget.window,
            c.budget.sampling_burst
        ),
        (3, Duration::from_millis(500), 20)
    );
    let o = &c.budget_overrides[0];
    assert_eq!(
        (o.group.as_deref(), o.upstream.as_deref()),
        (Some("g"), None)
    );
    assert_eq!(
        (
            o.limits.max_rounds,
            o.limits.window,
            o.limits.sampling_burst
        ),
        (3, Duration::from_millis(500), 1)
    );
    assert_eq!(o.limits.max_tokens_action, MaxTokensAction::Deny);
}

// === [auth] and the listener ===

#[test]
fn a_listener_off_loopback_needs_auth() {
    let err = refused("listen = \"0.0.0.0:8080\"\n");
    assert_eq!(
        err,
        "sluice.toml: listen = 0.0.0.0:8080 is not loopback but [auth] configures no API keys and no JWT: anyone could call through; add [auth] or listen on 127.0.0.1"
    );
    load("listen = \"0.0.0.0:8080\"\n[auth]\napi_keys_env = \"KEYS\"\n").unwrap();
}

#[test]
fn auth_defaults_fill_the_resource_and_the_jwt_claims() {
    let c = load("listen = \"127.0.0.1:7\"\npath = \"/m\"\n[auth.jwt]\nissuer = \"i\"\n").unwrap();
    assert_eq!(c.auth.resource, "http://127.0.0.1:7/m");
    let j = c.auth.jwt.unwrap();
    assert_eq!(
        (
            j.issuer.as_str(),
            j.principal_claim.as_str(),
            j.groups_claim.as_str(),
            j.leeway_ms
        ),
        ("i", "sub", "groups", 30_000)
    );
    let c = load("[auth]\nresource = \"https://r/\"\n").unwrap();
    assert_eq!(c.auth.resource, "https://r/");
}

// === [metrics] ===

#[test]
fn metrics_require_auth_needs_auth() {
    let err = refused("[metrics]\nrequire_auth = true\n");
    assert_eq!(
        err,
        "sluice.toml: metrics.require_auth = true but [auth] configures no API keys and no JWT: add [auth] or drop require_auth"
    );
    assert!(
        load("[metrics]\nrequire_auth = true\n[auth]\napi_keys_env = \"KEYS\"\n")
            .unwrap()
            .metrics
            .require_auth
    );
    assert!(!load("").unwrap().metrics.require_auth);
}

// === [bridge] ===

#[test]
fn bridge_gather_ms_is_at_most_200() {
    assert_eq!(
        refused("[bridge]\ngather_ms = 201\n"),
        "sluice.toml: bridge.gather_ms = 201: expected at most 200"
    );
    assert_eq!(
        load("[bridge]\ngather_ms = 200\n").unwrap().bridge.gather,
        Duration::from_millis(200)
    );
}

#[test]
fn bridge_defaults_and_per_principal_floors() {
    let b =
        load("[bridge]\nmax_client_sessions_per_principal = 0\nmax_sessions_per_principal = 0\n")
            .unwrap()
            .bridge;
    assert_eq!(
        (b.gather, b.park, b.session_idle),
        (
            Duration::from_millis(20),
            Duration::from_secs(60),
            Duration::from_secs(300)
        )
    );
    assert_eq!(
        (b.max_sessions, b.max_client_sessions, b.client_session_idle),
        (1024, 1000, Duration::from_secs(1800))
    );
    assert_eq!(
        (
            b.max_client_sessions_per_principal,
            b.max_sessions_per_principal,
            b.max_subscriptions_per_session
        ),
        (1, 1, 256)
    );
    assert!((64..=65_536).contains(&b.max_parked));
}

// === [limits] and [timeouts] ===

#[test]
fn connection_and_in_flight_limits_are_1_to_a_billion() {
    for key in ["max_connections", "max_in_flight"] {
        assert_eq!(
            refused(&format!("[limits]\n{key} = 0\n")),
            format!("sluice.toml: limits.{key} = 0: expected 1 to 1000000000")
        );
        let huge = format!("[limits]\n{key} = 9223372036854775807\n");
        assert_eq!(
            refused(&huge),
            format!("sluice.toml: limits.{key} = 9223372036854775807: expected 1 to 1000000000")
        );
        assert!(
            load(&format!("[limits]\n{key} = 1000000000\n")).is_ok(),
            "{key} at the bound"
        );
    }
}

#[test]
fn limits_max_json_depth_is_8_to_128() {
    assert_eq!(
        refused("[limits]\nmax_json_depth = 7\n"),
        "sluice.toml: limits.max_json_depth = 7: expected 8 to 128"
    );
    assert_eq!(
        refused("[limits]\nmax_json_depth = 129\n"),
        "sluice.toml: limits.max_json_depth = 129: expected 8 to 128"
    );
    assert_eq!(
        load("[limits]\nmax_json_depth = 8\n")
            .unwrap()
            .limits
            .max_json_depth,
        8
    );
    assert_eq!(
        load("[limits]\nmax_json_depth = 128\n")
            .unwrap()
            .limits
            .max_json_depth,
        128
    );
}

#[test]
fn limits_have_floors_and_timeouts_have_defaults() {
    let l =
        load("[limits]\nmax_header_bytes = 10\nmax_streams = 0\nmax_streams_per_principal = 0\n")
            .unwrap()
            .limits;
    assert_eq!(
        (
            l.max_header_bytes,
            l.max_streams,
            l.max_streams_per_principal,
            l.max_json_depth
        ),
        (8192, 1, 1, 64)
    );
    let t = load("[timeouts]\nrequest_ms = 5\n").unwrap().timeouts;
    assert_eq!(
        (t.request, t.connect, t.stream_idle),
        (
            Duration::from_millis(5),
            Duration::from_secs(2),
            Duration::from_secs(300)
        )
    );
}

// === [state] and [audit] ===

#[test]
fn state_keys_are_parsed_at_load() {
    assert_eq!(
        refused("[state]\nkeys = [\"nope\"]\n"),
        "sluice.toml: state.keys: expected ID:BASE64, e.g. 1:<44 base64 characters>"
    );
    let s = load("[state]\nkey_env = \"K\"\n").unwrap().state;
    assert_eq!(
        (s.keys.len(), s.key_env.as_deref(), s.replica.as_str()),
        (0, Some("K"), "local")
    );
    let a = load("").unwrap().audit;
    assert_eq!(
        (a.enabled, a.sink.as_str(), a.capacity),
        (true, "stderr", 8192)
    );
}

// === the order errors are reported in ===

#[test]
fn the_first_failing_check_is_the_one_reported() {
    // An exposed listener without auth is reported before a bad bridge, limits or state value.
    let err = refused(
        "listen = \"0.0.0.0:1\"\n[bridge]\ngather_ms = 300\n[limits]\nmax_json_depth = 1\n",
    );
    assert!(err.contains("is not loopback"), "{err}");
    let err = refused(
        "[bridge]\ngather_ms = 300\n[limits]\nmax_json_depth = 1\n[metrics]\nrequire_auth = true\n",
    );
    assert!(err.contains("gather_ms"), "{err}");
    let err = refused("[limits]\nmax_json_depth = 1\n[metrics]\nrequire_auth = true\n");
    assert!(err.contains("max_json_depth"), "{err}");
    let err = refused("[metrics]\nrequire_auth = true\n[state]\nkeys = [\"nope\"]\n");
    assert!(err.contains("require_auth"), "{err}");
    let err = refused("[[budget.override]]\n[[upstream]]\nname = \"a b\"\nurl = \"http://h/\"\n");
    assert!(err.contains("upstream name"), "{err}");
}

#[test]
fn quotas_load_in_order_and_one_that_would_count_nothing_is_refused() {
    let up = "[[upstream]]\nname = \"alpha\"\nurl = \"http://127.0.0.1:9/mcp\"\n";
    let good = format!("{up}[[quota]]\nname = \"search\"\ngroup = [\"eng\"]\nupstream = [\"alpha\"]\ntool = [\"search*\"]\ncalls_per_window = 10\n[[quota]]\nname = \"all\"\ncalls_per_window = 100\nwindow_ms = 1000\nburst = 5\n");
    let c = load(&good).unwrap();
    let q: Vec<_> = c
        .quotas
        .iter()
        .map(|q| (q.name.as_str(), q.calls_per_window, q.burst, q.window))
        .collect();
    assert_eq!(
        q,
        [
            ("search", 10, 10, Duration::from_secs(60)),
            ("all", 100, 5, Duration::from_secs(1))
        ]
    );
    for (quota, says) in [
        ("calls_per_window = 1\n", "needs a name"),
        ("name = \"q\"\n", "needs calls_per_window"),
        (
            "name = \"q\"\ncalls_per_window = 0\n",
            "calls_per_window = 0 is out of range",
        ),
        (
            "name = \"q\"\ncalls_per_window = 1\nburst = 2000000\n",
            "burst = 2000000 is out of range",
        ),
        (
            "name = \"q\"\ncalls_per_window = 1\nwindow_ms = 0\n",
            "window_ms = 0 is out of range",
        ),
        (
            "name = \"q\"\ncalls_per_window = 1\nupstream = [\"beta\"]\n",
            "upstream \"beta\" is not configured",
        ),
        (
            "name = \"q\"\ncalls_per_window = 1\ntool = [\"\"]\n",
            "an empty tool glob",
        ),
    ] {
        let err = refused(&format!("{up}[[quota]]\n{quota}"));
        assert!(err.contains(says), "{quota:?}: {err}");
    }
    let twice = refused(&format!("{up}[[quota]]\nname = \"q\"\ncalls_per_window = 1\n[[quota]]\nname = \"q\"\ncalls_per_window = 2\n"));
    assert!(twice.contains("given twice"), "{twice}");
}
