//! cargo-fuzz target `uri_template`: see `checks::uri_template` (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::uri_template(data));
