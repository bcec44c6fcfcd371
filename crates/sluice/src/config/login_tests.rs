//! The loader's tests of `[auth.login]`: its defaults, and what it is refused with (the key to
//! set, and why).

use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "sluice.toml", &Overrides::default())
}

fn refused(text: &str) -> String {
    load(text).unwrap_err().0
}

const IDP: &str = "idp_issuer = \"https://login.example.com\"\nidp_client_id = \"sluice\"\n";

#[test]
fn login_loads_with_its_defaults_and_names_sluice_as_the_authorization_server() {
    let cfg = load(&format!(
        "listen = \"0.0.0.0:8080\"\n[auth]\nresource = \"https://gw.example.com/mcp\"\n[auth.login]\n{IDP}"
    ))
    .unwrap();
    let l = cfg.auth.login.as_ref().expect("login");
    assert_eq!(l.issuer, "https://gw.example.com");
    assert_eq!(l.callback(), "https://gw.example.com/login/callback");
    assert_eq!(l.idp_scopes, vec!["openid"]);
    assert_eq!(
        (l.principal_claim.as_str(), l.groups_claim.as_str()),
        ("sub", "groups")
    );
    assert_eq!(
        (l.access_token_ttl_ms, l.refresh_token_ttl_ms),
        (600_000, 86_400_000)
    );
    assert!(l.dynamic_registration && l.client_metadata_documents && !l.allow_loopback_metadata);
    assert_eq!(
        cfg.auth.authorization_servers,
        vec!["https://gw.example.com"]
    );
}

#[test]
fn login_without_an_idp_or_with_empty_values_is_refused_with_the_key_to_set() {
    let e = refused("[auth.login]\n");
    assert!(
        e.contains("auth.login.idp_issuer is missing or empty: set it to"),
        "{e}"
    );
    let e = refused(
        "[auth.login]\nidp_issuer = \"https://login.example.com\"\nidp_client_id = \" \"\n",
    );
    assert!(
        e.contains("auth.login.idp_client_id is missing or empty"),
        "{e}"
    );
    let e = refused(&format!(
        "[auth.login]\n{IDP}idp_client_secret_env = \"\"\n"
    ));
    assert!(e.contains("idp_client_secret_env is empty"), "{e}");
    let e = refused("[auth.login]\nidp_issuer = \"login.example.com\"\nidp_client_id = \"s\"\n");
    assert!(e.contains("auth.login.idp_issuer"), "{e}");
}

#[test]
fn login_refuses_a_plain_http_issuer_off_loopback_bad_lifetimes_and_no_registration() {
    let e = refused(&format!(
        "[auth.login]\n{IDP}issuer = \"http://gw.example.com\"\n"
    ));
    assert!(
        e.contains("plain http on a host that is not loopback"),
        "{e}"
    );
    assert!(load(&format!(
        "[auth.login]\n{IDP}issuer = \"http://127.0.0.1:8080\"\n"
    ))
    .is_ok());
    let e = refused(&format!(
        "[auth.login]\n{IDP}issuer = \"https://gw.example.com/sso\"\n"
    ));
    assert!(e.contains("has a path"), "{e}");
    assert!(load(&format!(
        "[auth.login]\n{IDP}issuer = \"https://gw.example.com/\"\n"
    ))
    .is_ok());
    let e = refused(&format!("[auth.login]\n{IDP}access_token_ttl_ms = 1000\n"));
    assert!(
        e.contains("access_token_ttl_ms = 1000 is out of bounds: use 60000 to 3600000"),
        "{e}"
    );
    let e = refused(&format!(
        "[auth.login]\n{IDP}dynamic_registration = false\nclient_metadata_documents = false\n"
    ));
    assert!(e.contains("no client could register"), "{e}");
    let e = refused(&format!(
        "[auth]\nauthorization_servers = [\"https://idp.example\"]\n[auth.login]\n{IDP}"
    ));
    assert!(e.contains("Sluice is the authorization server"), "{e}");
}
