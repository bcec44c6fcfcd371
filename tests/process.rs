//! The tests that run the built `sluice` binary as a child process: the hostile suite
//! (issue 10), the hardening bounds (issue 5) and the demo walkthrough. See tests/binary/mod.rs.

mod support;

mod binary;
