//! Bridge B with real 2025-11-25 clients (issue 6, item 5 and its acceptance points): clients that
//! know only the handshake era (initialize, `Mcp-Session-Id`, server→client requests mid-call)
//! work through Sluice, whose upstreams speak 2026-07-28 (or 2025-11-25 behind bridge A).
//!
//! ```text
//!  Python mcp==1.30.0 client ──┐                ┌─ py:   Python mcp==2.3.0 upstream, 2026-07-28
//!  TS sdk 1.32.2 client ───────┤   Sluice       │        (ask_llm, ask_raw: input_required)
//!  Python mcp==2.3.0 (auto) ───┼── bridge B ────┼─ py1:  Python mcp==1.30.0 upstream, 2025-11-25
//!  raw HTTP (reqwest) ─────────┘   (in-proc)    │        (mid-call sampling: bridge A behind B)
//!                                               └─ mock: a Rust 2026-07-28 upstream (echo,
//!                                                        forever = always input_required, hang)
//! ```
//!
//! - `sdk_clients`: each legacy SDK client completes the sampling tools of both Python upstreams;
//!   the input_required rounds reach its sampling handler as `sampling/createMessage` requests on
//!   the call's stream. The `mcp==2.3.0` client in `auto` mode ends up on 2026-07-28. On the raw
//!   wire: priming event, the server's request, 202 for the POSTed answer, then the result with no
//!   `resultType` on the same stream.
//! - (bridge B's sessions against the mock alone are tests/in_process/bridge_b_sessions.rs.)
//! - `dual_era`: a dual-era upstream serves each client on its own era (a 2025-11-25 client on
//!   its 2025-11-25 wire, so 2025-style mid-call sampling works; a modern client as direct).
//! - `stateless_dual_era`: a dual-era upstream whose 2025-11-25 side keeps no session (the
//!   TypeScript SDK 2.x) serves 2025-11-25 clients on its modern wire, so its asks reach them.
//! - `sse_clients`: 2024-11-05 HTTP+SSE clients (the Python SDK's `sse_client`, the MCP
//!   Inspector's CLI with `--transport sse`) at `/sse`, the same sessions and rounds.
//! - `cancel`: `notifications/cancelled` from a legacy client cancels the upstream request.
//! - `governance`: the round cap holds for a legacy client (`-31010` in-stream) and the audit
//!   log names the client era `legacy`.
//!
//! Everything binds 127.0.0.1 port 0; timeouts and expiries are milliseconds; no test sleeps
//! longer than 2 s. Peers come from `eval "$(bash scripts/peers.sh)"`; without them the tests that
//! use them fail and say so. The Python upstreams are shared by the tests of the binary (tests/support/peers.rs).

mod cancel;
mod dual_era;
mod governance;
mod sdk_clients;
mod sse_clients;
mod stateless_dual_era;
