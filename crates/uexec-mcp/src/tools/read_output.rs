//! `read_output`: page through a session's transcript on disk, also after it exited. Its
//! schema, its arguments, the read (whose transcripts a caller may read) and the page as a
//! result.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::{ExecError, OutputPage, ReadOutputRequest, SessionStore};

use super::parse::{field, integer, object, reject_unknown, session_id, string, ArgError, Args};
use super::render::{stop_fields, Answer};
use super::schema::{to_schema, transcript_stopped_schema};
use crate::stores::OwnerTable;

pub const NAME: &str = "read_output";

/// Field names of `read_output`.
pub const FIELDS: &[&str] = &[
    "session_id",
    "transcript",
    "offset",
    "limit",
    "grep",
    "tail_lines",
];

/// `read_output`: pages through a transcript.
pub fn tool() -> Tool {
    let max = uexec_core::store::READ_OUTPUT_MAX_BYTES;
    let default = uexec_core::store::READ_OUTPUT_DEFAULT_BYTES;
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "The session, running or recently exited (its transcript is kept until the disk caps rotate it away). Give this or transcript."},
            "transcript": {"type": "string", "description": "A transcript path a result named (for a command that exited in its first call, whose session id you never saw); only your own sessions' transcripts are readable."},
            "offset": {"type": "integer", "description": "Byte offset in everything the session printed to start at. Default: the first byte kept. What a result left out is named in its text as `Transcript: PATH (bytes A..B left out here`: start at A, or at C where it adds `read_output has C..D` (the rest rotated away or is lost)."},
            "limit": {"type": "integer", "default": default, "description": format!("Most bytes to return. Default {default}, at most {max}.")},
            "grep": {"type": "string", "description": "Only the lines matching this regex (Rust syntax), each prefixed with its byte offset; scans at most 64 MiB from offset."},
            "tail_lines": {"type": "integer", "description": "Only the last N lines (1 to 10000). Not with offset or grep."}
        },
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer"},
            "transcript": {"type": "string"},
            "offset": {"type": "integer"},
            "next_offset": {"type": "integer", "description": "Where the next page starts."},
            "total": {"type": "integer", "description": "Bytes in the transcript: what the session printed so far, unless transcript_stopped says the transcript stopped there."},
            "first_kept": {"type": "integer", "description": "Bytes before this offset were rotated away."},
            "transcript_stopped": transcript_stopped_schema(),
            "text": {"type": "string"},
            "matches": {"type": "integer"}
        },
        "required": ["transcript", "offset", "next_offset", "total", "first_kept", "text"]
    });
    Tool::new(
        NAME,
        "Read a session's full output from its transcript on disk, also after it exited: what a result cut out of the middle, the last lines, or the lines matching a regex.",
        to_schema(schema),
    )
    .with_raw_output_schema(to_schema(output))
}

/// `read_output` arguments.
pub fn request(arguments: Option<&Args>) -> Result<ReadOutputRequest, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, FIELDS)?;
    let session_id = match field(&args, "session_id") {
        None => None,
        Some(_) => Some(session_id(&args)?),
    };
    Ok(ReadOutputRequest {
        session_id,
        transcript: string(&args, "transcript")?.map(std::path::PathBuf::from),
        offset: integer(&args, "offset")?,
        limit: integer(&args, "limit")?,
        grep: string(&args, "grep")?,
        tail_lines: integer(&args, "tail_lines")?,
    })
}

/// Reads a page for the caller of `store`; `owners` are the daemon's stores when the caller
/// is a person at the daemon.
pub fn call(
    store: &Arc<SessionStore>,
    owners: Option<&OwnerTable>,
    arguments: Option<&Args>,
) -> Answer {
    let req = request(arguments).map_err(|e| e.to_string())?;
    read(store, owners, req)
        .map(result)
        .map_err(|e| e.to_string())
}

/// `read_output` from `store`, the caller's: by path, only its own sessions' transcripts;
/// a person at the daemon reads any owner's, or any session directory under the root.
fn read(
    store: &Arc<SessionStore>,
    owners: Option<&OwnerTable>,
    req: ReadOutputRequest,
) -> Result<OutputPage, ExecError> {
    match (owners, &req.transcript) {
        (Some(owners), Some(path)) => {
            let owner = owners
                .all()
                .into_iter()
                .map(|(_, s)| s)
                .find(|s| s.owns_transcript(path));
            match owner {
                Some(owner) => owner.read_output(req),
                None => store.read_any_output(req),
            }
        }
        _ => store.read_output(req),
    }
}

/// A transcript page: a header line, then the text.
fn result(page: OutputPage) -> CallToolResult {
    let whose = page
        .session_id
        .map(|id| format!("Session {id} transcript"))
        .unwrap_or_else(|| "Transcript".to_owned());
    let mut header = format!(
        "{whose} {}: bytes {}..{} of {}",
        page.transcript.display(),
        page.offset,
        page.next_offset,
        page.total
    );
    if page.first_kept > 0 {
        header.push_str(&format!(" (bytes 0..{} rotated away)", page.first_kept));
    }
    if let Some(stop) = &page.stop {
        header.push_str(&format!(
            "; {} (bytes from {} on are lost)",
            stop.text(),
            stop.at
        ));
    }
    if let Some(n) = page.matches {
        header.push_str(&format!("; {n} matching lines"));
    }
    let mut structured = json!({
        "transcript": page.transcript.display().to_string(),
        "offset": page.offset,
        "next_offset": page.next_offset,
        "total": page.total,
        "first_kept": page.first_kept,
        "text": page.text,
    });
    if let Some(stop) = &page.stop {
        structured["transcript_stopped"] = stop_fields(stop);
    }
    if let Some(n) = page.matches {
        structured["matches"] = json!(n);
    }
    if let Some(id) = page.session_id {
        structured["session_id"] = json!(id);
    }
    let mut result =
        CallToolResult::success(vec![ContentBlock::text(format!("{header}\n{}", page.text))]);
    result.structured_content = Some(structured);
    result
}

#[cfg(test)]
mod tests {
    use uexec_core::snapshot::Omitted;
    use uexec_core::transcript::{coverage, TranscriptInfo};
    use uexec_core::{Snapshot, Status};

    use super::*;

    /// A default client reads a result's text alone: `offset` is described in the words of
    /// the line that text shows where it left bytes out, not in structured fields.
    #[test]
    fn the_offset_is_described_in_the_words_a_result_s_text_shows() {
        let tool = tool();
        let offset = tool.input_schema["properties"]["offset"]["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut cut = Snapshot::new(
            &Default::default(),
            100,
            std::time::Duration::ZERO,
            Status::Exited { exit_code: Some(0) },
        );
        let info = TranscriptInfo {
            dir: "/t/1000-abcdef".into(),
            total: 170,
            first_kept: 120,
            stop: None,
        };
        cut.transcript = Some(info.dir.clone());
        cut.omitted_range = Some(Omitted {
            range: 100..200,
            lines: 10,
            warning_len: 0,
        });
        cut.omitted_coverage = Some(coverage(&(100..200), &info));
        let line = cut.transcript_line().unwrap_or_default();
        assert!(
            line.starts_with("Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has 120..170;"),
            "{line}"
        );
        assert!(
            offset.contains("`Transcript: PATH (bytes A..B left out here`")
                && offset.contains("`read_output has C..D`"),
            "{offset}"
        );
        assert!(!offset.contains("omitted_range"), "{offset}");
    }
}
