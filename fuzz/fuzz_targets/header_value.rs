//! cargo-fuzz target `header_value`: see `checks::header_value` (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::header_value(data));
