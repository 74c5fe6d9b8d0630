//! The committed fuzz corpus (`fuzz/corpus/TARGET/*`) replayed through the fuzz targets'
//! own bodies on stable Rust, so CI checks every input without nightly or libFuzzer.

use std::path::Path;

#[path = "../../../../fuzz/bodies.rs"]
mod bodies;

#[test]
fn every_committed_corpus_input_passes_its_fuzz_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut failures = Vec::new();
    for (target, body) in bodies::TARGETS {
        let dir = corpus.join(target);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("no corpus for {target} in {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "the corpus of {target} is empty");
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            if std::panic::catch_unwind(|| body(&data)).is_err() {
                failures.push(input.display().to_string());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "corpus inputs that fail: {failures:#?}"
    );
}
