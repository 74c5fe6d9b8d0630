//! A truncated result names exactly what it cut (issue 38 §4): the model saw 200 tokens of
//! `seq 200000`'s 1.29 MB, and the result named only the middle the 1 MiB pending buffer
//! dropped (`bytes 524288..764607 left out`) and counted the lines of what that buffer kept
//! (`Total output lines: 164131`). In uexec's dialect a result now names every byte it left
//! out, the buffer's cut and the token budget's as one range, and counts every line the
//! command printed; text and structured fields agree, and `read_output` from the range's
//! start reads the first byte the model did not see. Codex's dialect keeps Codex's text,
//! whose count is of the text it kept, byte for byte.

use serde_json::{json, Value};

use crate::helpers::{call, stdio_client, structured, text};

/// What `seq N` prints.
fn seq_output(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

/// The output a truncated body shows, on both sides of its `…N tokens truncated…` mark.
fn shown(body: &str) -> (&str, &str) {
    let (_warning, kept) = body.split_once("\n\n").expect("a warning, then the output");
    let (head, rest) = kept.split_once('\u{2026}').expect("a truncation mark");
    let (_tokens, tail) = rest.split_once('\u{2026}').expect("the mark's end");
    (head, tail)
}

fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} in {v}"))
}

#[tokio::test]
async fn a_truncated_result_names_every_byte_it_left_out_and_counts_every_line() {
    let want = seq_output(200_000);
    assert_eq!(want.len(), 1_288_895);
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 200000", "max_output_tokens": 200, "login": false}),
    )
    .await;
    let said = text(&r);
    let s = structured(&r);
    assert_eq!(s["exit_code"], 0, "{said}");
    let body = s["output"].as_str().expect("the output");
    let (head, tail) = shown(body);
    // Every byte outside the range is in the text, and every byte in it is not.
    let (start, end) = (
        u64_at(&s, "/omitted_range/start"),
        u64_at(&s, "/omitted_range/end"),
    );
    assert_eq!(
        (start, end),
        (head.len() as u64, (want.len() - tail.len()) as u64),
        "{said}"
    );
    assert_eq!(head, &want[..start as usize]);
    assert_eq!(tail, &want[end as usize..]);
    assert_eq!(
        s["omitted_readable"],
        json!({"start": start, "end": end}),
        "the transcript has all of it"
    );
    // The text says the same range, and counts the command's lines.
    let dir = s["transcript"].as_str().expect("a transcript");
    assert!(
        said.contains(&format!(
            "Transcript: {dir} (bytes {start}..{end} left out here; read_output has them)\n"
        )),
        "{said}"
    );
    assert!(
        said.contains("Warning: truncated output (original token count: 322224)\nTotal output lines: 200000\n\n"),
        "{said}"
    );
    assert!(
        body.contains("Total output lines: 200000\n"),
        "the structured output says what the text says: {body}"
    );
    // The range's start reads the first byte the model did not see.
    let page = call(
        &client,
        "read_output",
        json!({"transcript": dir, "offset": start, "limit": 100}),
    )
    .await;
    assert_eq!(
        structured(&page)["text"],
        want[start as usize..start as usize + 100],
        "{}",
        text(&page)
    );
    client.cancel().await.unwrap();

    // A default client reads the text alone: the same lines.
    let (client, _, _) = stdio_client(&[]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 200000", "max_output_tokens": 200, "login": false}),
    )
    .await;
    let said = text(&r);
    assert!(
        said.contains(&format!(
            " (bytes {start}..{end} left out here; read_output has them)\n"
        )),
        "{said}"
    );
    assert!(said.contains("Total output lines: 200000\n"), "{said}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn codex_s_dialect_keeps_codex_s_count_of_the_text_it_kept() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 200000", "max_output_tokens": 200, "login": false}),
    )
    .await;
    let said = text(&r);
    // Codex counts the lines of the text it has: the 1 MiB head and tail, the marker of
    // the cut between them on a line of its own with the line it split.
    assert!(
        said.contains("\nOriginal token count: 322224\nOutput:\nWarning: truncated output (original token count: 322224)\nTotal output lines: 164131\n\n1\n2\n"),
        "{said}"
    );
    assert!(!said.contains("Transcript:"), "{said}");
    client.cancel().await.unwrap();
}

/// Escape sequences removed before truncation: the range is still of the session's bytes,
/// and every byte outside it is in the text, cleaned.
#[tokio::test]
async fn a_cleaned_truncated_result_names_the_session_bytes_it_left_out() {
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": r"for i in $(seq 3000); do printf '\033[1m%d\033[0m\n' $i; done",
               "max_output_tokens": 100, "strip_ansi": true, "login": false}),
    )
    .await;
    let s = structured(&r);
    let said = text(&r);
    let body = s["output"].as_str().expect("the output");
    let (head, tail) = shown(body);
    let raw: String = (1..=3000).map(|i| format!("\x1b[1m{i}\x1b[0m\n")).collect();
    let clean = |s: &str| s.replace("\x1b[1m", "").replace("\x1b[0m", "");
    let (start, end) = (
        u64_at(&s, "/omitted_range/start") as usize,
        u64_at(&s, "/omitted_range/end") as usize,
    );
    assert_eq!(clean(&raw[..start]), head, "{said}");
    assert_eq!(clean(&raw[end..]), tail, "{said}");
    // Not a byte more: the range's first and last bytes are ones the text would show.
    assert_eq!(clean(&raw[..=start]).len(), head.len() + 1, "{said}");
    assert_eq!(clean(&raw[end - 1..]).len(), tail.len() + 1, "{said}");
    assert!(said.contains("Total output lines: 3000\n"), "{said}");
    assert!(
        said.contains(&format!(
            "(bytes {start}..{end} left out here; read_output has them)"
        )),
        "{said}"
    );
    client.cancel().await.unwrap();
}
