//! The adversarial suite of issue 10: hostile upstreams, hostile clients and hostile configs,
//! one module per defect class. Each test states the behaviour Sluice must have; most fail on
//! the code before the issue-10 fixes (each module's doc says why).
//!
//! - `decisions`: governance decides on decoded values (escaped or repeated `resultType`);
//! - `numbers`: `maxTokens` and `Mcp-Param-*` integers compared as numbers, whatever their
//!   spelling;
//! - `digest`: nesting depth, and the request digest that binds a state to its request;
//! - `fail_open`: configs whose secret, key or file is missing or empty stop `check` and `serve`;
//! - `bounded`: work per request is bounded (CPU, memory, metric labels, sessions, streams);
//! - `guarantees`: single use, scopes, audit and redaction hold on every path.
//!
//! Sluice runs as the built binary (tests/support/process.rs), its config from
//! `Gateway::hostile()` (tests/support/gateway.rs), in front of the raw mock upstreams of
//! tests/support/modern.rs and legacy.rs, with `RUST_LOG=trace`; every test
//! also asserts its output carries none of the unique strings the test put into arguments,
//! prompts and upstream messages.

mod bounded;
mod decisions;
mod digest;
mod fail_open;
mod guarantees;
mod numbers;

/// A policy denying every sampling ask (rule `no-sampling`).
pub(crate) const DENY_SAMPLING: &str =
    "[[rule]]\nname = \"no-sampling\"\nmatch = { method = [\"sampling/createMessage\"] }\neffect = \"deny\"\nreason = \"no sampling here\"\n";
