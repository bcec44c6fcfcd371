//! `[admin]`: what is refused at load.

use super::Config;

fn load(admin: &str, auth: &str) -> Result<Config, String> {
    let text = format!(
        "listen = \"127.0.0.1:8080\"\n{auth}\n[admin]\n{admin}\n[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n"
    );
    Config::from_toml(&text, "t.toml", &Default::default()).map_err(|e| e.to_string())
}

const KEY_A: &str = "a3f1c0d2e4b5a6978877665544332211a3f1c0d2e4b5a6978877665544332211";

#[test]
fn the_admin_listener_is_loopback_and_open_by_default() {
    let cfg = load("", "").expect("loads");
    let a = cfg.admin.expect("on");
    assert_eq!(a.listen.to_string(), "127.0.0.1:9090");
    assert!(a.open());
}

#[test]
fn off_loopback_without_admin_credentials_is_refused() {
    let e = load("listen = \"0.0.0.0:9090\"", "").unwrap_err();
    assert!(e.contains("not loopback but no admin credentials"), "{e}");
    let ok =
        format!("listen = \"0.0.0.0:9090\"\n[[admin.keys]]\nname = \"ops\"\nsha256 = \"{KEY_A}\"");
    assert!(load(&ok, "").is_ok());
}

#[test]
fn an_mcp_principals_key_is_never_an_admin_key() {
    let auth = format!("[[auth.api_keys]]\nsha256 = \"{KEY_A}\"\nprincipal = \"alice\"");
    let admin = format!(
        "[[admin.keys]]\nname = \"ops\"\nsha256 = \"{}\"",
        KEY_A.to_uppercase()
    );
    let e = load(&admin, &auth).unwrap_err();
    assert!(e.contains("also an [[auth.api_keys]] key"), "{e}");
}

#[test]
fn bad_keys_roles_and_bounds_are_refused_with_what_to_do() {
    for (admin, says) in [
        (
            "[[admin.keys]]\nname = \"ops\"\nsha256 = \"abc\"",
            "64 hex digits",
        ),
        (
            "[[admin.keys]]\nname = \" \"\nsha256 = \"abc\"",
            "name is empty",
        ),
        ("jwt_role = \"ops\"", "needs [auth.jwt]"),
        ("session_ms = 1", "session_ms = 1 is out of range"),
        ("max_sessions = 0", "max_sessions = 0 is out of range"),
        (
            "recent_audit = 10001",
            "recent_audit = 10001 is out of range",
        ),
        ("listen = \"127.0.0.1:8080\"", "the MCP listener's address"),
        ("listen = \"0.0.0.0:8080\"\nkeys = [{name = \"a\", sha256 = \"a3f1c0d2e4b5a6978877665544332211a3f1c0d2e4b5a6978877665544332211\"}]", "the MCP listener's address"),
        ("listen = \"nowhere\"", "not an address"),
    ] {
        let e = load(admin, "").unwrap_err();
        assert!(e.contains(says), "{admin}: {e}");
    }
    let twice = format!(
        "[[admin.keys]]\nname = \"a\"\nsha256 = \"{KEY_A}\"\n[[admin.keys]]\nname = \"a\"\nsha256 = \"{}\"",
        KEY_A.replace('a', "b")
    );
    assert!(load(&twice, "")
        .unwrap_err()
        .contains("taken by another key"));
}
