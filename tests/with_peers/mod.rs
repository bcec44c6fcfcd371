//! The tests against real SDK peers (tests/support/peers.rs starts them).
//!
//! - `interop`: the Python `mcp==2.3.0` and rmcp clients and upstreams through Sluice (issue 2);
//! - `bridge_a`: 2026-07-28 clients calling 2025-11-25 upstreams (issue 3);
//! - `bridge_b`: 2025-11-25 SDK clients through Sluice (issue 6);
//! - `governance`: round caps, budgets, policies, approvals and limits (issue 4);
//! - `canary`: no travelling value reaches Sluice's output (issue 5);
//! - `stdio`, `sse`: real stdio servers Sluice starts as child processes, and a 2024-11-05
//!   HTTP+SSE server (issue 12);
//! - `stdio_boundary`: what a stdio server cannot reach of Sluice, and that nothing it starts
//!   outlives it (issue 28); `stdio_pool`: a 2025-11-25 stdio server's processes pooled per
//!   principal, idle ones ended (issue 29).
//! - `connect`: the README's quick start and "Connect your client" snippets, run as written
//!   with the Inspector CLI, mcp-remote and the Python and TypeScript SDKs (issue 29);
//! - `pins`: a rug pull by a real SDK server restarted with a changed description, quarantined
//!   until accepted (issue 33 item 4);
//! - `health`: upstreams down and back, told once each, 503 naming them (issue 29);
//! - `tls`: an upstream over https://, its CA trusted or not;
//! - `upstream_auth`: Sluice as its upstreams' OAuth client, against the conformance suite's
//!   authorization scenarios (issue 31); `simple_auth`: each user signing in to the Python
//!   SDK's `simple-auth` example through Sluice, on both client wires (issue 31);
//! - `token_exchange`: each user through the company's IdP (`oidc-provider`, RFC 8693) to an
//!   MCP server it protects (issue 31);
//! - `login`: a real MCP host (the TypeScript SDK's OAuth client) signing in to Sluice's own
//!   authorization server, the user's sign-in delegated to the company's IdP (issue 32);
//! - `console`: the operator console in headless Chromium (selenium), against the admin
//!   listener (issue 33).

mod bridge_a;
mod bridge_b;
mod canary;
mod connect;
mod console;
mod governance;
mod health;
mod interop;
mod login;
mod pins;
mod resilience;
mod simple_auth;
mod sse;
mod stdio;
mod stdio_boundary;
mod stdio_modern;
mod stdio_pool;
mod stdio_shares;
mod tls;
mod token_exchange;
mod traces;
mod upstream_auth;
