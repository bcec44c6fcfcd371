//! What a stdio server inherits of Sluice's environment.
//!
//! Takes the upstream's [`StdioConfig`] and Sluice's environment (passed in, so tests give a
//! list and never set a variable); gives the variables the child starts with before its
//! configured `env` is applied. Always [`BASE`]; with `inherit_env = true` (the default) also
//! what package runners (`npx`, `uvx`, `pip`) need on a corporate network: the proxy and CA
//! variables ([`NETWORK`]), their own settings ([`NETWORK_PREFIXES`]) and, unless the server
//! runs as another `user` (they name Sluice's user's directories), the XDG base directories;
//! then the names and `PREFIX*` patterns of `inherit`. Refuses, silently and always, a
//! variable Sluice's config names as one of its own secrets (`secret_env`: state keys, API
//! keys, the HS256 secret, upstream bearer tokens, a cluster URL's variable, OTLP headers),
//! whatever pattern it matches, and a name that is not UTF-8.

use std::ffi::OsString;

use crate::config::StdioConfig;

/// Inherited by every stdio server (with a `user`, `HOME` and `USER` are that user's).
pub const BASE: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];

/// Proxy and CA settings, inherited with `inherit_env = true` (the default).
pub const NETWORK: [&str; 13] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// Package runners' own settings (registry, index, CA, cache), inherited with `inherit_env`.
pub const NETWORK_PREFIXES: [&str; 4] = ["PIP_", "npm_config_", "NPM_CONFIG_", "UV_"];

/// The XDG base directories (caches, config), inherited with `inherit_env` and no `user`.
pub const XDG_PREFIX: &str = "XDG_";

/// The variables of `from` (Sluice's environment) a process of `cfg` starts with.
pub fn inherited(
    cfg: &StdioConfig,
    from: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    from.into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(|k| passes(cfg, k)))
        .collect()
}

/// Whether variable `name` of Sluice's goes to a process of `cfg`.
fn passes(cfg: &StdioConfig, name: &str) -> bool {
    if cfg.secret_env.iter().any(|s| s == name) {
        return false;
    }
    if BASE.contains(&name) {
        return true;
    }
    let network = NETWORK.contains(&name)
        || NETWORK_PREFIXES.iter().any(|p| name.starts_with(p))
        || (cfg.user.is_none() && name.starts_with(XDG_PREFIX));
    (cfg.inherit_env && network) || cfg.inherit.iter().any(|p| matches(p, name))
}

/// `NAME` matches itself; `PREFIX*` every name that starts with PREFIX.
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(inherit_env: bool, inherit: &[&str], secrets: &[&str]) -> StdioConfig {
        let mut c = crate::upstream::stdio::tests::config("true", 1, 0);
        c.inherit_env = inherit_env;
        c.inherit = inherit.iter().map(|s| (*s).to_owned()).collect();
        c.secret_env = secrets.iter().map(|s| (*s).to_owned()).collect();
        c
    }

    fn names(c: &StdioConfig, env: &[&str]) -> Vec<String> {
        let env = env.iter().map(|k| (OsString::from(k), OsString::from("v")));
        inherited(c, env)
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap_or_default())
            .collect()
    }

    const SLUICES: [&str; 12] = [
        "PATH",
        "HOME",
        "HTTPS_PROXY",
        "no_proxy",
        "NODE_EXTRA_CA_CERTS",
        "npm_config_cafile",
        "PIP_INDEX_URL",
        "UV_CACHE_DIR",
        "XDG_CACHE_HOME",
        "SLUICE_STATE_KEYS",
        "AWS_SECRET_ACCESS_KEY",
        "npm_config_token_of_sluice",
    ];

    #[test]
    fn the_network_and_package_runner_settings_are_inherited_by_default_and_nothing_else() {
        let got = names(&cfg(true, &[], &[]), &SLUICES);
        assert_eq!(
            got,
            SLUICES[..9]
                .iter()
                .chain(&SLUICES[11..])
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_variable_the_config_names_as_a_secret_is_never_inherited_whatever_pattern_it_matches() {
        let c = cfg(
            true,
            &["SLUICE_*", "AWS_SECRET_ACCESS_KEY"],
            &["SLUICE_STATE_KEYS", "npm_config_token_of_sluice", "HOME"],
        );
        let got = names(&c, &SLUICES);
        for secret in ["SLUICE_STATE_KEYS", "npm_config_token_of_sluice", "HOME"] {
            assert!(
                !got.contains(&secret.to_owned()),
                "{secret} passed: {got:?}"
            );
        }
        assert!(
            got.contains(&"AWS_SECRET_ACCESS_KEY".to_owned()),
            "named in inherit: {got:?}"
        );
    }

    #[test]
    fn inherit_env_false_keeps_only_the_base_and_what_inherit_names() {
        let got = names(&cfg(false, &["UV_*", "HTTPS_PROXY"], &[]), &SLUICES);
        assert_eq!(got, ["PATH", "HOME", "HTTPS_PROXY", "UV_CACHE_DIR"]);
    }

    #[test]
    fn with_a_user_the_xdg_directories_of_sluices_user_stay_out() {
        let mut c = cfg(true, &[], &[]);
        c.user = Some(crate::config::RunUser {
            written: "nobody".into(),
            uid: 65534,
            gid: Some(65534),
            account: None,
        });
        assert!(!names(&c, &SLUICES).contains(&"XDG_CACHE_HOME".to_owned()));
    }
}
