//! Scripts split into their parts, through the real bash grammar.
use super::*;

fn parts(script: &str) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    split(script, &Context::default(), &mut out);
    out.into_iter()
        .map(|c| {
            (
                c.words.iter().map(|w| w.text().to_owned()).collect(),
                c.opaque,
            )
        })
        .collect()
}

fn words(list: &[&str]) -> (Vec<String>, bool) {
    (list.iter().map(|s| (*s).to_owned()).collect(), false)
}

#[test]
fn every_simple_command_is_a_part() {
    assert_eq!(
        parts("ls; git push && true || false | cat & echo $(git fetch) >/dev/null"),
        vec![
            words(&["ls"]),
            words(&["git", "push"]),
            words(&["true"]),
            words(&["false"]),
            words(&["cat"]),
            words(&["echo", "$(git fetch)"]),
            words(&["git", "fetch"]),
        ]
    );
    assert_eq!(
        parts("(cd x && make) ; { a; } ; if t; then b; else c; fi; for i in 1; do d; done"),
        vec![
            words(&["cd", "x"]),
            words(&["make"]),
            words(&["a"]),
            words(&["t"]),
            words(&["b"]),
            words(&["c"]),
            words(&["d"]),
        ]
    );
}

#[test]
fn quotes_are_removed_and_expansions_kept() {
    let mut out = Vec::new();
    split(
        r#"'git' "push" or\igin "$x" a*b ~/x"#,
        &Context::default(),
        &mut out,
    );
    assert_eq!(
        out[0].words,
        vec![
            Word::Literal("git".into()),
            Word::Literal("push".into()),
            Word::Literal("origin".into()),
            Word::Expanded("\"$x\"".into()),
            Word::Expanded("a*b".into()),
            Word::Expanded("~/x".into()),
        ]
    );
}

#[test]
fn literal_words_of_one_command() {
    assert_eq!(
        literal_words("npm run 'test'"),
        Some(vec!["npm".into(), "run".into(), "test".into()])
    );
    assert_eq!(literal_words("a; b"), None);
    assert_eq!(literal_words("git $x"), None);
}
