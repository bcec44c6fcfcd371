//! cargo-fuzz target `digest`: see `checks::digest` (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::digest(data));
