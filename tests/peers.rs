//! The tests that need the real SDK peers (Python mcp==2.3.0 and mcp==1.30.0, Node 22 with
//! server-everything and the TypeScript SDK, rmcp in-process): interop, bridge A, bridge B's
//! SDK clients, governance and the canary. Peers come from `eval "$(bash scripts/peers.sh)"`;
//! without them these tests fail and say so. See tests/with_peers/mod.rs.

mod support;

mod with_peers;
