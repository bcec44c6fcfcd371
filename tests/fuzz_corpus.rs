//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/*`) through the same checks
//! the cargo-fuzz targets run (`fuzz/checks.rs`), so CI exercises them on every `cargo test`
//! without a nightly toolchain or libFuzzer. A crash the fuzzer finds is added to its corpus
//! directory and stays covered here.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::PathBuf;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no seed inputs", dir.display());
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!(
                "fuzz/corpus/{target}/{} fails its check (run `cargo fuzz run {target} {}` to see it)",
                f.file_name().unwrap().to_string_lossy(),
                f.display()
            );
        }
    }
    eprintln!("{target}: {} corpus inputs replayed", files.len());
}

#[test]
fn the_envelope_corpus_replays_clean() {
    replay("envelope", checks::envelope);
}

#[test]
fn the_header_value_corpus_replays_clean() {
    replay("header_value", checks::header_value);
}

#[test]
fn the_open_state_corpus_replays_clean() {
    replay("open_state", checks::open_state);
}

#[test]
fn the_uri_template_corpus_replays_clean() {
    replay("uri_template", checks::uri_template);
}

#[test]
fn the_sse_reader_corpus_replays_clean() {
    replay("sse_reader", checks::sse_reader);
}

#[test]
fn the_digest_corpus_replays_clean() {
    replay("digest", checks::digest);
}
