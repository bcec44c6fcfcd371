//! The in-process tests: Sluice (`sluice::start`) on 127.0.0.1 port 0 in front of the mock
//! upstreams of tests/support (or the built-in demo upstream), no external peers.
//!
//! The front door, discovery, federation, listen streams and the modern upstream client
//! (issue 2), bridge B's sessions against a mock (issue 6), authentication, the audit log and
//! `/metrics` (issue 5), and the shipped policy files. See tests/in_process/mod.rs.

mod support;

mod in_process;
