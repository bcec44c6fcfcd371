//! Three replicas sharing one Redis behind HAProxy round robin (no stickiness), in front of the
//! real `mcp==1.30.0` upstream (tests/peers/py1_upstream.py):
//!
//! ```text
//!  raw 2026-07-28 client ─┐            ┌─ sluice r1 ─┐
//!  mcp==1.30.0 client ────┼─ HAProxy ──┼─ sluice r2 ─┼─ py1 upstream (2025-11-25)
//!  (2025-11-25)           │  (rr)      └─ sluice r3 ─┘
//!                         │                  │
//!                         └──────────── redis-server (unix socket)
//! ```
//!
//! - `shared`: a principal's sampling budget and a tool's call quota exact across replicas; an
//!   approval consumed once across replicas;
//! - `rounds`: a bridge A round whose every request lands on another replica; a 2025-11-25
//!   client's sampling round through bridge B across replicas;
//! - `failures`: a replica killed mid-round (its round's retry gets `owner_gone` within
//!   `timeouts.connect_ms`, another replica's round completes); Redis stopped and started again
//!   (`closed`: governed requests refused with `-31019` and `Retry-After`, the rest served, then
//!   recovery without a restart; `local`: served on per-process state, counted);
//! - `internal`: the internal listener attacked directly (replayed, misdirected, forged, unsigned
//!   and non-POST forwards refused) and a 2025-11-25 session record bounded whatever its client
//!   sends;
//! - `unread`: the internal listener verifies a forward's head (which signs the body's length
//!   and digest) before it reads a byte of the body: a forged head declaring 4 MiB is answered
//!   401 and closed while no body byte was sent; a signed length over the body limit 413; a body
//!   that is not the signed one and a replica of another version refused; connections bounded
//!   per source;
//! - `approvals`: a call held on one replica approved through another's admin route (Redis);
//! - `boundary`: a forward signed with the cluster's own key runs only a continuation its
//!   replica owns (a fresh call as another principal is refused and never reaches the
//!   upstream; the genuine continuation is served and audited with `forwarded_from`); a
//!   replica name a client wrote into an answer id, and a principal carrying a line, forge no
//!   log line;
//! - `stall`: Redis stalled (SIGSTOP) past `redis_timeout_ms` during a state's single-use
//!   claim: the client's retry is served once after it resumes, a replay refused;
//! - `vault`: a user's sign-in through one replica serves every replica (the token vault in
//!   Redis), a due token refreshed once for twelve calls at once on three replicas, `sluice
//!   tokens list|revoke` (with the company IdP, `oidc-provider`, as the authorization server);
//! - `login`: `[auth.login]` across two replicas sharing Redis: a host signs in through one, its
//!   token is taken by the other, its refresh token rotates at the other, and a replay there
//!   revokes the sign-in for both (issue 32);
//! - `pins`: a tool quarantined and accepted in Redis, honoured by every replica (issue 33);
//! - `deploy`, `deploy_docker`, `deploy_haproxy`, `deploy_helm`, `deploy_helm_values`: the files of
//!   deploy/ work as their comments say (see each; `deploy_kit` runs their documented commands).
//!
//! Every process binds loopback (Redis a unix socket, Sluice port 0, HAProxy a free port).
//! `redis-server` and `haproxy` come from Debian (.ci/run installs them); the Python peers from
//! `eval "$(bash scripts/peers.sh)"`. Without them these tests fail and say so.

mod admin;
mod approvals;
mod boundary;
mod deploy;
mod deploy_docker;
mod deploy_haproxy;
mod deploy_helm;
mod deploy_helm_values;
mod deploy_kit;
mod failures;
mod harness;
mod internal;
mod login;
mod pins;
mod rounds;
mod shared;
mod stall;
mod unread;
mod vault;

use base64::Engine as _;
use serde_json::Value;

/// The replica a sealed `requestState` names as its owner (the test reads the payload between
/// the two header bytes and the 32-byte tag; Sluice itself opens it only after the MAC).
pub(crate) fn owner_of(state: &str) -> String {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(state)
        .expect("base64url requestState");
    let payload: Value = serde_json::from_slice(&raw[2..raw.len() - 32]).expect("a JSON payload");
    payload["o"].as_str().expect("an owner").to_owned()
}

/// Waits (polling a separate process's output, at most 5 s) until `pred` holds of the cluster's
/// audit records; gives them.
pub(crate) async fn audit_until(
    c: &harness::Cluster,
    what: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let recs = c.audit();
        if pred(&recs) {
            return recs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the audit records never showed {what}: {recs:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
