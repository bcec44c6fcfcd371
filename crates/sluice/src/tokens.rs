//! `sluice tokens list|revoke`: an operator's view of the token vault, and revocation.
//!
//! Takes a config (its `[state]` keys open the vault, its `[cluster]` says where the vault is)
//! and a principal and upstream to narrow to; gives one line per entry (principal, upstream,
//! when its access token expires, whether it refreshes, its scopes and issuer: never a token)
//! or how many entries were dropped. Every replica stops sending a revoked token within
//! `oauth::user::RECHECK`. Refuses a config without `[cluster]`: the tokens are then in the
//! serving process's memory only, where no other process can reach them.

use std::sync::Arc;

use crate::config::Config;
use crate::upstream::oauth::vault::{Listed, Vault};

/// The vault `cfg` serves with, reached from this process.
fn vault(cfg: &Config) -> Result<Vault, String> {
    let Some(c) = &cfg.cluster else {
        return Err("tokens are kept in the serving process's memory when there is no [cluster]: no other process can list or revoke them; configure [cluster] (Redis) to manage them from the command line, or restart Sluice to drop them all".into());
    };
    let keys = crate::state::keys_from(&cfg.state.keys, cfg.state.key_env.as_deref())?;
    let cluster = crate::cluster::Cluster::new(c)?;
    Ok(Vault::new(&keys, Some(Arc::new(cluster))))
}

fn unreachable(e: crate::cluster::Unavailable) -> String {
    format!("{e}: check cluster.redis_url and that Redis is up, then run the command again")
}

/// The entries held (of `principal`, at `upstream`, when given), one line each, with a header.
pub async fn list(
    cfg: &Config,
    principal: Option<&str>,
    upstream: Option<&str>,
) -> Result<String, String> {
    let all = vault(cfg)?
        .list(principal, upstream)
        .await
        .map_err(unreachable)?;
    let mut out = String::from("principal\tupstream\texpires\trefresh\tscopes\tissuer\n");
    for l in &all {
        out += &line(l);
    }
    Ok(out)
}

fn line(l: &Listed) -> String {
    let now = crate::upstream::oauth::vault::now_ms();
    let expires = match l.expires_ms.checked_sub(now) {
        Some(left) => format!("in {}s", left / 1000),
        None => "expired".to_owned(),
    };
    let refresh = if l.refreshable { "yes" } else { "no" };
    // Names as written, unless a control character (a tab, a newline) would break the line:
    // then escaped; and what would reorder it in a terminal (bidirectional controls) as \uXXXX.
    let escaped = |s: &str| match s.chars().any(char::is_control) {
        true => crate::escape::Escaped(&s).to_string(),
        false => crate::escape::line_safe(s).into_owned(),
    };
    format!(
        "{}\t{}\t{expires}\t{refresh}\t{}\t{}\n",
        escaped(&l.principal),
        escaped(&l.upstream),
        escaped(&l.scopes.join(" ")),
        escaped(&l.issuer),
    )
}

/// Drops `principal`'s entries (at `upstream` only, when given); says how many.
pub async fn revoke(
    cfg: &Config,
    principal: &str,
    upstream: Option<&str>,
) -> Result<String, String> {
    let n = vault(cfg)?
        .revoke(principal, upstream)
        .await
        .map_err(unreachable)?;
    let at = upstream.map_or(String::new(), |u| format!(" at {u}"));
    Ok(format!(
        "revoked {n} token(s) of {principal}{at}; every replica stops using them within {} s\n",
        crate::upstream::oauth::user::RECHECK.as_secs()
    ))
}

/// Ends every sign-in of `principal` through `[auth.login]`: its refresh tokens are refused
/// from now on, on every replica (access tokens already issued last until they expire);
/// says how many.
pub async fn revoke_sign_ins(cfg: &Config, principal: &str) -> Result<String, String> {
    let Some(c) = &cfg.cluster else {
        return Err("sign-ins are kept in the serving process's memory when there is no [cluster]: no other process can revoke them; configure [cluster] (Redis), or restart Sluice to end them all".into());
    };
    let Some(login) = &cfg.auth.login else {
        return Err("this config has no [auth.login]: no sign-in through Sluice to revoke".into());
    };
    let cluster = Arc::new(crate::cluster::Cluster::new(c)?);
    let store = crate::login::store::Store::shared(cluster.clone());
    let here = crate::auth::revoked::Revoked::default();
    let n = crate::login::revocations::revoke(&store, &here, Some(&cluster), principal).await?;
    let _ = login;
    Ok(format!(
        "revoked {n} sign-in(s) of {principal}: their refresh tokens are refused now, and their access tokens on every replica within {} s\n",
        crate::login::revocations::FOLLOW.as_secs().max(1) + 1
    ))
}
