//! The loader's tests of `[upstream.auth] mode = "token_exchange"`: what it is refused with
//! (the file and the line, and what to set), and what a checked one holds and prints.

use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "sluice.toml", &Overrides::default())
}

fn refused(text: &str) -> String {
    load(text).unwrap_err().0
}

const JWT: &str =
    "[auth.jwt]\nissuer = \"https://idp.test\"\njwks_file = \"/nonexistent/jwks.json\"\n";
const UP: &str = "[[upstream]]\nname = \"internal\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.auth]\nmode = \"token_exchange\"\n";

fn secret() -> &'static str {
    std::env::set_var("SLUICE_TEST_TX_SECRET", "tx-s3cret");
    "client_id = \"sluice\"\nclient_secret_env = \"SLUICE_TEST_TX_SECRET\"\n"
}

#[test]
fn token_exchange_loads_with_its_issuer_client_and_target() {
    let text = format!(
        "{JWT}{UP}issuer = \"https://idp.test\"\n{}audience = \"internal-api\"\nresource = \"https://internal.test/mcp\"\nscopes = [\"mcp:tools\"]\n",
        secret()
    );
    let cfg = load(&text).unwrap();
    let auth = cfg.upstreams[0].auth.as_ref().expect("token exchange");
    assert_eq!(auth.mode, AuthMode::TokenExchange);
    assert_eq!(auth.target.audience.as_deref(), Some("internal-api"));
    assert_eq!(
        auth.target.resource.as_deref(),
        Some("https://internal.test/mcp")
    );
    assert_eq!(auth.secret(), Some("tx-s3cret"));
    let printed = cfg.redacted();
    assert!(
        !printed.contains("tx-s3cret") && printed.contains("audience = \"internal-api\""),
        "{printed}"
    );
    load(&printed).expect("the printed config loads back");
}

#[test]
fn token_exchange_without_auth_jwt_is_refused_saying_to_configure_it() {
    let text = format!("{UP}issuer = \"https://idp.test\"\n{}", secret());
    let err = refused(&text);
    assert!(
        err.contains("mode = \"token_exchange\"") && err.contains("configure [auth.jwt]"),
        "{err}"
    );
}

#[test]
fn token_exchange_without_its_parts_is_refused_with_the_line_and_what_to_set() {
    let err = refused(&format!("{JWT}{UP}{}", secret()));
    assert!(
        err.starts_with("sluice.toml:5:") && err.contains("needs issuer"),
        "{err}"
    );
    let err = refused(&format!("{JWT}{UP}issuer = \"https://idp.test\"\n"));
    assert!(
        err.contains("client_id is required for mode = \"token_exchange\""),
        "{err}"
    );
    let err = refused(&format!(
        "{JWT}{UP}issuer = \"https://idp.test\"\nclient_id = \"s\"\ntoken_endpoint_auth = \"none\"\n"
    ));
    assert!(err.contains("needs a secret or a key"), "{err}");
    let err = refused(&format!(
        "{JWT}{UP}issuer = \"https://idp.test\"\n{}resource = \"/relative\"\n",
        secret()
    ));
    assert!(err.contains("not an absolute URL"), "{err}");
    let err = refused(&format!(
        "{JWT}{UP}issuer = \"https://idp.test\"\n{}audience = \" \"\n",
        secret()
    ));
    assert!(err.contains("audience is empty"), "{err}");
}

#[test]
fn audience_and_resource_in_another_mode_are_refused() {
    let text = format!(
        "{JWT}[[upstream]]\nname = \"u\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.auth]\nmode = \"client_credentials\"\n{}audience = \"x\"\n",
        secret()
    );
    assert!(refused(&text).contains("audience and resource are for mode = \"token_exchange\""));
    let text = "[[upstream]]\nname = \"u\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.auth]\nresource = \"http://x/\"\n";
    assert!(refused(text).contains("set the mode or remove them"));
}
