//! The loader's tests: what a file or a flag is refused with (the exact message, with the file
//! and the line), what each section defaults to, and that the printed config loads back.

use std::time::Duration;

use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "sluice.toml", &Overrides::default())
}

fn refused(text: &str) -> String {
    load(text).unwrap_err().0
}

fn flags(over: Overrides) -> Result<Config, ConfigError> {
    Config::from_toml("", "sluice.toml", &over)
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
fn an_upstream_name_holding_the_separator_is_refused_with_its_line() {
    let err = load("[[upstream]]\nname = \"a__b\"\nurl = \"http://127.0.0.1:1/mcp\"\n")
        .unwrap_err()
        .0;
    assert!(
        err.starts_with("sluice.toml:2:") && err.contains("separator"),
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
    let e = load("[[upstream]]\nname = \"a\"\nurl = \"https://u:pa55word@h/mcp\"\n")
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

// === [[upstream]] ===

#[test]
fn an_upstream_flag_needs_name_equals_url() {
    let err = flags(Overrides {
        upstreams: vec!["nope".into()],
        ..Default::default()
    })
    .unwrap_err()
    .0;
    assert_eq!(err, "--upstream \"nope\": expected NAME=URL or NAME=stdio:COMMAND, e.g. --upstream weather=http://127.0.0.1:9000/mcp");
    let err = flags(Overrides {
        upstreams: vec!["a b=http://127.0.0.1:1/".into()],
        ..Default::default()
    })
    .unwrap_err()
    .0;
    assert_eq!(
        err,
        "--upstream: upstream name \"a b\": expected one or more of [A-Za-z0-9_.-]"
    );
}

#[test]
fn upstream_names_and_urls_are_checked_with_their_lines() {
    let err = refused("\n[[upstream]]\nname = \"a b\"\nurl = \"http://127.0.0.1:1/mcp\"\n");
    assert_eq!(
        err,
        "sluice.toml:3: upstream name \"a b\": expected one or more of [A-Za-z0-9_.-]"
    );
    let two =
        "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:2/mcp\"\n";
    assert_eq!(
        refused(two),
        "sluice.toml:5: upstream name \"a\" is used twice"
    );
    let err = refused("[[upstream]]\nname = \"a\"\nurl = \"https://u:pw@h/mcp\"\n");
    assert_eq!(
        err,
        "sluice.toml:3: upstream \"a\" url \"https://redacted@h/mcp\": expected an http:// URL"
    );
    let err = refused("separator = \"-\"\n[[upstream]]\nname = \"a-b\"\nurl = \"http://h/mcp\"\n");
    assert_eq!(err, "sluice.toml:3: upstream name \"a-b\" contains the prefix separator \"-\": rename it or set another `separator`");
}

#[test]
fn upstream_defaults_and_scopes_are_collected_for_auth() {
    let c = load(
        "[[upstream]]\nname = \"a\"\nurl = \"http://h/mcp\"\nrequired_scopes = [\"s\"]\n\
         [[upstream]]\nname = \"b\"\nurl = \"http://h/b\"\nera = \"2025-11-25\"\ncache_ttl_ms = 5\ncache_scope = \"public\"\n",
    )
    .unwrap();
    assert_eq!(
        (
            c.upstreams[0].era,
            c.upstreams[0].cache_ttl_ms,
            c.upstreams[0].cache_scope
        ),
        (Era::Auto, 0, CacheScope::Private)
    );
    assert_eq!(
        (
            c.upstreams[1].era,
            c.upstreams[1].cache_ttl_ms,
            c.upstreams[1].cache_scope
        ),
        (Era::Legacy, 5, CacheScope::Public)
    );
    assert_eq!(
        c.auth.upstream_scopes,
        [("a".to_owned(), vec!["s".to_owned()])]
    );
    assert!(c.prefixed());
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

// === stdio upstreams ===

#[test]
fn a_stdio_upstream_is_read_printed_and_loaded_back() {
    let text = "[[upstream]]\nname = \"files\"\ncommand = [\"npx\", \"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv\", \"postgresql://u:pa55@db/x\"]\nenv = { TOKEN = \"s3cret\" }\ncwd = \"/srv\"\nstderr = \"file:/tmp/files.log\"\nmax_processes = 3\n";
    let c = load(text).unwrap();
    let s = c.upstreams[0].stdio.as_ref().expect("a stdio upstream");
    assert_eq!(
        s.command,
        [
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/srv",
            "postgresql://u:pa55@db/x"
        ]
    );
    assert_eq!((s.max_processes, s.stderr_max_bytes), (3, 10 << 20));
    assert_eq!(
        s.start,
        std::time::Duration::from_secs(30),
        "a server's boot is given 30 s by default"
    );
    assert_eq!(s.stderr, Stderr::File("/tmp/files.log".into()));
    assert_eq!(c.upstreams[0].url, "");
    let printed = c.redacted();
    assert!(
        !printed.contains("s3cret") && !format!("{c:?}").contains("s3cret"),
        "{printed}"
    );
    assert!(
        !printed.contains("pa55") && !format!("{c:?}").contains("pa55"),
        "{printed}"
    );
    let again = Config::from_toml(&printed, "printed", &Overrides::default())
        .expect("the printed config loads again");
    assert_eq!(again.redacted(), printed);
    assert_eq!(
        again.upstreams[0].stdio.as_ref().map(|s| s.stderr.clone()),
        Some(Stderr::File("/tmp/files.log".into()))
    );
    // A stdio server may be named 2026-07-28 (it is then only probed with server/discover).
    let modern = load("[[upstream]]\nname = \"m\"\ncommand = [\"x\"]\nera = \"2026-07-28\"\n")
        .expect("a modern stdio upstream");
    assert_eq!(modern.upstreams[0].era, crate::config::Era::Modern);
}

#[test]
fn a_stdio_upstream_is_refused_when_it_mixes_transports_or_bounds() {
    let up = |rest: &str| refused(&format!("[[upstream]]\nname = \"f\"\n{rest}\n"));
    assert!(
        up("url = \"http://127.0.0.1:1/\"\ncommand = [\"x\"]").contains("has both url and command")
    );
    assert!(up("era = \"auto\"").contains("has neither url nor command"));
    assert!(up("command = []").contains("command is empty"));
    assert!(up("command = [\"x\"]\nheaders = { A = \"b\" }")
        .contains("a stdio upstream takes its credentials in env"));
    assert!(
        up("command = [\"x\"]\nstderr = \"syslog\"").contains("expected \"drop\" or \"file:PATH\"")
    );
    assert!(
        up("command = [\"x\"]\nmax_processes = 0").contains("max_processes = 0: give 1 to 4096")
    );
    assert!(up("command = [\"x\"]\nmax_processes = 100000").contains("give 1 to 4096"));
    let sink =
        refused("[audit]\nsink = \"/var/log/a.log\"\n[[upstream]]\nname = \"f\"\ncommand = [\"x\"]\nstderr = \"file:/var/log/a.log\"\n");
    assert!(
        sink.contains("is the audit log or Sluice's own output"),
        "{sink}"
    );
    assert!(up("command = [\"x\"]\nstderr = \"file:/dev/stderr\"").contains("Sluice's own output"));
    assert!(
        up("command = [\"x\"]\nenv = { \"A=B\" = \"c\" }").contains("not a usable variable name")
    );
    assert!(
        up("url = \"http://127.0.0.1:1/\"\nmax_processes = 2").contains("are for a stdio upstream")
    );
    assert!(up("url = \"http://127.0.0.1:1/\"\nstart_ms = 2").contains("are for a stdio upstream"));
    assert!(up("command = [\"x\"]\nstart_ms = 0").contains("start_ms = 0: give 1 to 600000"));
    assert!(up("command = [\"x\"]\nstart_ms = 600001").contains("give 1 to 600000"));
    let slow = load("[[upstream]]\nname = \"f\"\ncommand = [\"x\"]\nstart_ms = 90000\n").unwrap();
    assert_eq!(
        slow.upstreams[0].stdio.as_ref().map(|s| s.start),
        Some(std::time::Duration::from_secs(90))
    );
    assert!(
        slow.redacted().contains("start_ms = 90000"),
        "{}",
        slow.redacted()
    );
}

#[test]
fn the_upstream_flag_takes_a_stdio_command_split_like_a_shell_without_one() {
    let c = flags(Overrides {
        upstreams: vec!["fs=stdio:node 'my server.js' \"/srv/a b\" $HOME".into()],
        ..Default::default()
    })
    .unwrap();
    let s = c.upstreams[0].stdio.as_ref().expect("a stdio upstream");
    assert_eq!(s.command, ["node", "my server.js", "/srv/a b", "$HOME"]);
    let e = flags(Overrides {
        upstreams: vec!["fs=stdio:node 'open s3cret".into()],
        ..Default::default()
    })
    .unwrap_err()
    .0;
    assert!(e.contains("unclosed quote") && !e.contains("s3cret"), "{e}");
    let e = flags(Overrides {
        upstreams: vec!["fs=stdio:".into()],
        ..Default::default()
    })
    .unwrap_err()
    .0;
    assert!(e.contains("command is empty"), "{e}");
}

#[test]
fn an_upstreams_transport_is_auto_unless_named_and_printed_only_when_named() {
    let up = |rest: &str| {
        load(&format!(
            "[[upstream]]\nname = \"u\"\nurl = \"http://127.0.0.1:1/mcp\"\n{rest}\n"
        ))
    };
    let auto = up("").unwrap();
    assert_eq!(auto.upstreams[0].transport, crate::config::Transport::Auto);
    assert!(
        !auto.redacted().contains("transport"),
        "{}",
        auto.redacted()
    );
    for (named, t) in [
        ("streamable-http", crate::config::Transport::StreamableHttp),
        ("sse", crate::config::Transport::Sse),
    ] {
        let c = up(&format!("transport = \"{named}\"")).unwrap();
        assert_eq!(c.upstreams[0].transport, t);
        assert!(
            c.redacted().contains(&format!("transport = \"{named}\"")),
            "{}",
            c.redacted()
        );
    }
    assert!(up("transport = \"websocket\"").is_err());
}

#[test]
fn http2_is_per_host_for_urls_only_and_printed_when_set() {
    let c = load(
        "[[upstream]]\nname = \"a\"\nurl = \"http://h:81/mcp\"\nhttp2 = true\n\
         [[upstream]]\nname = \"b\"\nurls = [\"http://h:82/b\", \"http://h:83/b\"]\nhttp2 = true\n\
         [[upstream]]\nname = \"c\"\nurl = \"http://h:84/c\"\n",
    )
    .unwrap();
    assert_eq!(
        c.upstreams.iter().map(|u| u.http2).collect::<Vec<_>>(),
        [true, true, false]
    );
    let hosts: Vec<(String, bool)> = c
        .http_versions()
        .iter()
        .map(|(a, h2)| (a.to_string(), *h2))
        .collect();
    let want = [
        ("h:81", true),
        ("h:82", true),
        ("h:83", true),
        ("h:84", false),
    ];
    assert_eq!(hosts, want.map(|(a, h2)| (a.to_owned(), h2)));
    assert!(c.redacted().contains("http2 = true"));
    assert_eq!(
        load(&c.redacted()).unwrap().http_versions(),
        c.http_versions()
    );
    let err = refused("[[upstream]]\nname = \"a\"\ncommand = [\"srv\"]\nhttp2 = true\n");
    assert_eq!(
        err,
        "sluice.toml:2: upstream \"a\": http2 is for a url, not a command; remove it"
    );
    let err = refused("[[upstream]]\nname = \"a\"\nurl = \"http://h/mcp\"\nhttp2 = true\nheaders = { HOST = \"v.example\" }\n");
    assert!(err.contains("a Host header with http2 = true"), "{err}");
    let err = refused("[[upstream]]\nname = \"a\"\nurl = \"http://u:pw@h/mcp\"\nhttp2 = true\n");
    assert!(
        err.contains("credentials in a URL with http2 = true") && !err.contains("pw"),
        "{err}"
    );
    // One host and port, one HTTP version: the pool is per host (and port, and userinfo).
    let err =
        refused("[[upstream]]\nname = \"a\"\nurl = \"http://h:81/a\"\nhttp2 = true\n[[upstream]]\nname = \"b\"\nurl = \"http://h:81/b\"\n");
    assert!(
        err.contains("upstreams \"a\" and \"b\" share h:81 but not http2"),
        "{err}"
    );
}
