//! cargo-fuzz target `open_state`: see `checks::open_state` (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::open_state(data));
