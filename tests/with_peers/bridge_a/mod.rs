//! Bridge A against real legacy servers (issue 3, item 8 and its acceptance points): 2026-07-28
//! clients call 2025-11-25 upstreams through Sluice, and every mid-call ask of the upstream
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`) becomes an `input_required`
//! round under a sealed `requestState`.
//!
//! ```text
//!  Python mcp==2.3.0 client ─┐              ┌─ py1: Python mcp==1.30.0 upstream (tests/peers/py1_upstream.py)
//!  (2026-07-28 mode)         ├─ Sluice ─────┤      asks on the POST stream and on the GET stream
//!  rmcp 3.11 client ─────────┤  (in-proc)   └─ everything: @modelcontextprotocol/server-everything@2026.8.31
//!  raw HTTP (reqwest) ───────┘
//! ```
//!
//! - `sdk_clients`: the SDK clients complete two-round sampling (POST and GET stream asks),
//!   elicitation and roots tools of the `mcp==1.30.0` server, and server-everything's sampling
//!   and elicitation tools.
//! - `concurrent`: ten concurrent calls of one principal, all parked before any is answered,
//!   answered in a shuffled order, each getting its own answer.
//! - `adversarial`: tampered, replayed, changed, expired and foreign-principal states; malformed,
//!   missing and state-less answers; a client that never comes back, one that disconnects, an
//!   upstream that dies mid-round, a client lacking a capability.
//! - `reload`: a round parked before a config reload that removes its upstream finishes after it.
//!
//! Everything binds 127.0.0.1 port 0; bridge timeouts are milliseconds; no test sleeps longer
//! than 2 s. Peers come from `eval "$(bash scripts/peers.sh)"`; without them these tests fail and
//! say so. The upstream processes are shared by the tests of the binary (tests/support/peers.rs).

mod adversarial;
mod concurrent;
mod gateway;
mod reload;
mod sdk_clients;
