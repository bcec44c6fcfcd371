//! cargo-fuzz target `sse_reader`: see `checks::sse_reader` (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sse_reader(data));
