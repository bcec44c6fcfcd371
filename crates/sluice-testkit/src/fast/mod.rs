//! The benchmark's fast mock upstreams, each run in a process of its own by `sluice-bench`:
//! [`http`] (a 2026-07-28 server and a 2025-11-25 one, answering from precomputed bodies) and
//! [`stdio`] (a 2025-11-25 stdio server). Takes requests; gives the answers a benchmark
//! measures through, with as little work of their own as a server can do; refuses nothing it
//! need not.

pub mod http;
pub mod stdio;

/// The size of the `arguments` object of every benchmark call.
pub const ARGS_BYTES: usize = 1024;

/// The text of the `text` argument: the sentence repeated until `arguments` is [`ARGS_BYTES`].
pub fn arg_text() -> String {
    let sentence =
        "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. ";
    let overhead = r#"{"text":""}"#.len();
    sentence
        .chars()
        .cycle()
        .take(ARGS_BYTES - overhead)
        .collect()
}
