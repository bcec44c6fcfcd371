//! Sluice's test kit: the mock MCP upstreams the tests, the demo and the benchmark share
//! (issue 30, step 5). It names the protocol model (`sluice-mcp`) and nothing of the product:
//! a mock speaks the wire as a server would.
//!
//! - [`modern`] and [`legacy`]: the tests' scripted 2026-07-28 and 2025-11-25 upstreams, raw
//!   bytes under the test's control;
//! - [`demo`]: the demo's servers, which answer from memory (the walkthrough and some tests);
//! - [`fast`]: the benchmark's mocks, which answer from precomputed bodies.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

pub mod demo;
pub mod fast;
pub mod legacy;
pub mod modern;

/// The body of every mock's answers.
pub type Body = BoxBody<Bytes, Infallible>;

/// The modern protocol version.
pub const V: &str = "2026-07-28";

/// Longest a mock waits for one thing a test drives (only an upper bound).
pub const WAIT: Duration = Duration::from_secs(10);
