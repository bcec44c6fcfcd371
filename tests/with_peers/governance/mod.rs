//! Governance through Sluice (issue 4, items 2, 3, 5 and 6, and its acceptance points), against
//! real peers: the `mcp==1.30.0` legacy upstream (tests/peers/py1_upstream.py, shared once per
//! binary) and a programmable modern (2026-07-28) mock upstream that counts what it receives.
//!
//! ```text
//!  raw HTTP (reqwest), ─ Sluice ─┬─ py1: Python mcp==1.30.0 upstream (asks mid-call; records events)
//!  API keys alice/bob    (in-proc)└─ modern mock (input_required forever, destructive tools)
//! ```
//!
//! - `round_cap`: the loop bomb (a tool that samples forever) cut at `max_rounds` exactly as
//!   counted, for a legacy and a modern upstream; per-group overrides.
//! - `budgets`: sampling and token budgets per principal (429, `Retry-After`, `retryAfterMs`);
//!   parked exchanges per principal.
//! - `policies`: the effects of `policies/default.toml`, `strict.toml` and `permissive.toml` on
//!   real asks and calls.
//! - `approval`: approval rounds accepted, declined, impossible; single use.
//! - `operator`: a real SDK (rmcp) call held for an operator, approved through the admin route.
//! - `limits`: `maxTokens` deny vs clamp; bytes per input request and per input response.
//!
//! Everything binds 127.0.0.1 port 0; no test sleeps longer than 2 s. Peers come from
//! `eval "$(bash scripts/peers.sh)"`; without them the legacy tests fail and say so.

mod setup;

mod approval;
mod budgets;
mod limits;
mod loops;
mod operator;
mod policies;
mod quotas;
mod round_cap;
