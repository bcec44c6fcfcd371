//! The loader's tests of `[[upstream]]` and `--upstream`: what a name, a URL, a stdio command
//! or a transport is refused with (the exact message, with the file and the line, or the flag),
//! what an upstream defaults to, and that a printed upstream loads back with its secrets hidden.

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

// === [[upstream]] ===

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
    let err = refused("[[upstream]]\nname = \"a\"\nurl = \"ftp://u:pw@h/mcp\"\n");
    assert_eq!(
        err,
        "sluice.toml:3: upstream \"a\" url \"ftp://redacted@h/mcp\": expected an http:// or https:// URL"
    );
    let https = "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nhttp2 = true\n";
    assert!(refused(https).contains("over https:// HTTP/2 is agreed in the TLS handshake"));
    assert!(load("[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\n").is_ok());
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

#[test]
fn a_configured_header_of_the_protocol_is_refused() {
    for h in [
        "Mcp-Method",
        "mcp-name",
        "MCP-Protocol-Version",
        "Mcp-Param-Region",
    ] {
        let err = refused(&format!(
            "[[upstream]]\nname = \"a\"\nurl = \"http://h/mcp\"\nheaders = {{ {h:?} = \"tools/call\" }}\n"
        ));
        assert!(
            err.starts_with("sluice.toml:2:") && err.contains("a header of the MCP protocol"),
            "{h}: {err}"
        );
    }
    assert!(load("[[upstream]]\nname = \"a\"\nurl = \"http://h/mcp\"\nheaders = { \"X-Mcp-Tenant\" = \"t\" }\n").is_ok());
}

// === [upstream.auth] ===

const CC: &str = "[[upstream]]\nname = \"crm\"\nurl = \"http://127.0.0.1:1/mcp\"\n[upstream.auth]\nmode = \"client_credentials\"\nclient_id = \"sluice\"\n";

#[test]
fn client_credentials_read_their_secret_at_load_and_never_print_it() {
    std::env::set_var("SLUICE_TEST_CC_SECRET", "s3cret-value");
    let cfg = load(&format!(
        "{CC}client_secret_env = \"SLUICE_TEST_CC_SECRET\"\nscopes = [\"mcp:read\"]\n"
    ))
    .unwrap();
    let auth = cfg.upstreams[0].auth.as_ref().expect("client credentials");
    assert_eq!(auth.secret(), Some("s3cret-value"));
    assert_eq!(auth.scopes.as_deref(), Some(&["mcp:read".to_owned()][..]));
    assert!(!format!("{:?}", cfg.upstreams[0]).contains("s3cret-value"));
    let printed = toml::to_string(&cfg.upstreams[0]).unwrap();
    assert!(
        !printed.contains("s3cret-value") && printed.contains("SLUICE_TEST_CC_SECRET"),
        "{printed}"
    );
}

#[test]
fn client_credentials_without_their_parts_are_refused_saying_what_to_set() {
    let err = refused(CC);
    assert!(
        err.starts_with("sluice.toml:2:") && err.contains("client_secret_env is required"),
        "{err}"
    );
    let err = refused(&format!(
        "{CC}client_secret_env = \"SLUICE_TEST_CC_UNSET_VAR\"\n"
    ));
    assert!(
        err.contains("SLUICE_TEST_CC_UNSET_VAR (client_secret_env) is not set"),
        "{err}"
    );
    std::env::set_var("SLUICE_TEST_CC_EMPTY", " ");
    let err = refused(&format!(
        "{CC}client_secret_env = \"SLUICE_TEST_CC_EMPTY\"\n"
    ));
    assert!(err.contains("is empty"), "{err}");
    let no_id = CC.replace("client_id = \"sluice\"\n", "client_secret_env = \"X\"\n");
    assert!(refused(&no_id).contains("client_id is required"));
}

#[test]
fn client_credentials_beside_a_static_credential_or_on_stdio_are_refused() {
    std::env::set_var("SLUICE_TEST_CC_SECRET2", "x");
    let both = format!("[[upstream]]\nname = \"crm\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = {{ Authorization = \"Bearer t\" }}\n[upstream.auth]\nmode = \"client_credentials\"\nclient_id = \"s\"\nclient_secret_env = \"SLUICE_TEST_CC_SECRET2\"\n");
    assert!(refused(&both).contains("remove headers.Authorization and bearer_token_env"));
    let stdio = "[[upstream]]\nname = \"s\"\ncommand = [\"true\"]\n[upstream.auth]\nmode = \"client_credentials\"\nclient_id = \"s\"\nclient_secret_env = \"SLUICE_TEST_CC_SECRET2\"\n";
    assert!(refused(stdio).contains("a stdio upstream takes its credentials in env"));
    let stray = "[[upstream]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/mcp\"\n[upstream.auth]\nclient_id = \"s\"\n";
    assert!(refused(stray).contains("are for mode = \"client_credentials\""));
    let cc = "[upstream.auth]\nmode = \"client_credentials\"\nclient_id = \"s\"\nclient_secret_env = \"SLUICE_TEST_CC_SECRET2\"\n";
    let two = format!(
        "[[upstream]]\nname = \"s\"\nurls = [\"http://a:1/mcp\", \"http://b:1/mcp\"]\n{cc}"
    );
    assert!(refused(&two).contains("several origins"));
    let one = format!(
        "[[upstream]]\nname = \"s\"\nurls = [\"http://a:1/mcp\", \"http://a:1/mcp2\"]\n{cc}"
    );
    assert!(load(&one).is_ok());
    let userinfo = format!("[[upstream]]\nname = \"s\"\nurl = \"http://u:pw@a:1/mcp\"\n{cc}");
    assert!(refused(&userinfo).contains("credentials in the url"));
}

#[test]
fn a_private_key_jwt_client_needs_a_readable_key_and_no_secret() {
    let base = "[[upstream]]\nname = \"s\"\nurl = \"http://a:1/mcp\"\n[upstream.auth]\nmode = \"client_credentials\"\nclient_id = \"s\"\ntoken_endpoint_auth = \"private_key_jwt\"\n";
    assert!(refused(base).contains("private_key_file is required"));
    let with_secret = format!("{base}client_secret_env = \"X\"\n");
    assert!(refused(&with_secret).contains("sends no secret: remove client_secret_env"));
    let missing = format!("{base}private_key_file = \"/nonexistent/key.pem\"\n");
    assert!(refused(&missing).contains("cannot be read"));
    let not_pem = std::env::temp_dir().join(format!("sluice-not-a-key-{}.pem", std::process::id()));
    std::fs::write(&not_pem, "not a key").unwrap();
    let bad = format!(
        "{base}private_key_file = {:?}\n",
        not_pem.display().to_string()
    );
    let err = refused(&bad);
    let _ = std::fs::remove_file(&not_pem);
    assert!(
        err.contains("is not a PEM key for ES256") && !err.contains("not a key\""),
        "{err}"
    );
}

const OAUTH: &str = "[[upstream]]\nname = \"gh\"\nurl = \"https://api.example/mcp\"\n[upstream.auth]\nmode = \"oauth\"\n";

#[test]
fn an_oauth_upstream_registers_itself_or_takes_a_pre_registered_client() {
    let cfg = load(OAUTH).unwrap();
    let auth = cfg.upstreams[0].auth.as_ref().expect("oauth");
    assert_eq!(auth.mode, AuthMode::Oauth);
    assert!(auth.client_id.is_empty() && auth.secret().is_none());
    let public = load(&format!(
        "{OAUTH}client_id = \"app\"\ntoken_endpoint_auth = \"none\"\nclient_metadata_url = \"https://sluice.example/oauth/client-metadata.json\"\nredirect_uri = \"https://sluice.example/oauth/callback\"\n"
    ))
    .unwrap();
    let auth = public.upstreams[0].auth.as_ref().expect("oauth");
    assert_eq!(auth.client_id, "app");
    assert!(auth.secret().is_none());
    std::env::set_var("SLUICE_TEST_OAUTH_SECRET", "oauth-s3cret");
    let confidential = load(&format!(
        "{OAUTH}client_id = \"app\"\nclient_secret_env = \"SLUICE_TEST_OAUTH_SECRET\"\n"
    ))
    .unwrap();
    let auth = confidential.upstreams[0].auth.as_ref().expect("oauth");
    assert_eq!(auth.secret(), Some("oauth-s3cret"));
    let printed = toml::to_string(&confidential.upstreams[0]).unwrap();
    assert!(!printed.contains("oauth-s3cret"), "{printed}");
}

#[test]
fn an_oauth_upstream_is_refused_what_it_cannot_use_saying_what_to_set() {
    let cases = [
        (
            "client_secret_env = \"X\"\n",
            "client_secret_env without client_id",
        ),
        ("client_id = \"app\"\n", "needs client_secret_env"),
        ("client_id = \" \"\n", "client_id is empty"),
        (
            "client_id = \"app\"\ntoken_endpoint_auth = \"none\"\nclient_secret_env = \"X\"\n",
            "sends no secret",
        ),
        (
            "token_endpoint_auth = \"private_key_jwt\"\n",
            "private_key_jwt is for mode",
        ),
        (
            "client_metadata_url = \"http://x/doc.json\"\n",
            "is not an https URL",
        ),
        (
            "client_metadata_url = \"https://x\"\n",
            "is not an https URL",
        ),
        (
            "redirect_uri = \"https://x/callback\"\n",
            "whose path is /oauth/callback",
        ),
    ];
    for (extra, want) in cases {
        let err = refused(&format!("{OAUTH}{extra}"));
        assert!(err.contains(want), "{extra}: {err}");
    }
    let cc = refused(&CC.replace(
        "client_id",
        "redirect_uri = \"https://x/oauth/callback\"\nclient_id",
    ));
    assert!(cc.contains("are for mode = \"oauth\""), "{cc}");
    let none = refused(&format!("{CC}token_endpoint_auth = \"none\"\n"));
    assert!(none.contains("is for mode = \"oauth\""), "{none}");
}

#[test]
fn a_printed_oauth_upstream_shows_its_method_and_loads_back() {
    let cfg = load(&format!(
        "{OAUTH}token_endpoint_auth = \"client_secret_post\"\n"
    ))
    .unwrap();
    let printed = cfg.redacted();
    assert!(
        printed.contains("token_endpoint_auth = \"client_secret_post\""),
        "{printed}"
    );
    assert!(!printed.contains("client_id"), "{printed}");
    let again = load(&printed).unwrap();
    assert_eq!(again.upstreams[0].auth, cfg.upstreams[0].auth);
}
