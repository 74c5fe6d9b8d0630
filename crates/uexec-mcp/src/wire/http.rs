//! The wire additions ([`super`]) on the streamable HTTP face, as a layer in front of rmcp's
//! service: it reads the first [`PEEK`] bytes of a `POST`'s body (a message longer than
//! that is neither `tools/list` nor a listen request, and passes untouched, streamed), and
//! - a `subscriptions/listen` request: its task ids go into its `_meta`, or it is refused
//!   here (HTTP 400 and the JSON-RPC error, as rmcp answers a missing capability), and its
//!   acknowledgment, the first event of the stream it opens, lists them;
//! - a `tools/list` request: its result (one JSON body, or an event of an SSE stream) names
//!   the task tools' `execution`.
//!
//! A response is rewritten line by line as it streams, until the one message sought went
//! by; after that (and for a line longer than [`PEEK`]) bytes pass as they come.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::{stream, Stream, StreamExt};
use serde_json::Value;

use super::{acknowledge, error_response, Listen, Wire};

/// The longest request body, and response line, this layer reads to rewrite.
const PEEK: usize = 1 << 20;

/// The layer: rewrites what it must of `request` and of its response.
pub async fn layer(wire: Wire, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let (head, rest) = peek(body).await;
    let Some(mut message) = rest
        .is_none()
        .then(|| serde_json::from_slice::<Value>(&head).ok())
        .flatten()
    else {
        let body = Body::from_stream(stream::iter([Ok(head)]).chain(rest.unwrap_or_else(empty)));
        return next.run(Request::from_parts(parts, body)).await;
    };
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let rewrite: Box<dyn FnMut(&mut Value) -> bool + Send> = match method.as_str() {
        "tools/list" => Box::new(move |m: &mut Value| match m.get_mut("result") {
            Some(result) if result.get("tools").is_some() => {
                wire.tools(result);
                true
            }
            _ => false,
        }),
        "subscriptions/listen" => match super::listen(&method, message.get_mut("params")) {
            Listen::Nothing => return pass(parts, head, next).await,
            Listen::Refused(error) => {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                let body = error_response(id, &error).to_string();
                let mut response = (StatusCode::BAD_REQUEST, body).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return response;
            }
            Listen::Tasks(ids) => Box::new(move |m: &mut Value| {
                if m.get("method").and_then(Value::as_str)
                    != Some("notifications/subscriptions/acknowledged")
                {
                    return false;
                }
                if let Some(params) = m.get_mut("params") {
                    acknowledge(params, &ids);
                }
                true
            }),
        },
        _ => return pass(parts, head, next).await,
    };
    let Ok(body) = serde_json::to_vec(&message) else {
        return pass(parts, head, next).await;
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    rewritten(response, rewrite)
}

type Rest = stream::BoxStream<'static, Result<Bytes, axum::Error>>;

fn empty() -> Rest {
    stream::empty().boxed()
}

/// The request as it came.
async fn pass(parts: axum::http::request::Parts, head: Bytes, next: Next) -> Response {
    next.run(Request::from_parts(parts, Body::from(head))).await
}

/// The body's first [`PEEK`] bytes (all of it, when it is no longer), and the rest, if any.
async fn peek(body: Body) -> (Bytes, Option<Rest>) {
    let mut stream = body.into_data_stream();
    let mut head = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                head.extend_from_slice(&chunk);
                if head.len() > PEEK {
                    return (Bytes::from(head), Some(stream.boxed()));
                }
            }
            Err(e) => {
                let failed: Rest = stream::iter([Err(e)]).boxed();
                return (Bytes::from(head), Some(failed));
            }
        }
    }
    (Bytes::from(head), None)
}

/// `response` with the first message `rewrite` accepts rewritten (a JSON body, or an SSE
/// event's `data:` line).
fn rewritten(response: Response, rewrite: Box<dyn FnMut(&mut Value) -> bool + Send>) -> Response {
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let lines = Lines {
        buffer: Vec::new(),
        sought: true,
        sse,
    };
    let inner = body.into_data_stream();
    // Each chunk as `feed` makes it; at the end, what is left in the buffer.
    let body = stream::unfold(Some((inner, lines, rewrite)), |state| async move {
        let (mut inner, mut lines, mut rewrite) = state?;
        match inner.next().await {
            Some(Ok(chunk)) => {
                let out = lines.feed(&chunk, &mut *rewrite);
                Some((Ok(out), Some((inner, lines, rewrite))))
            }
            Some(Err(e)) => Some((Err(e), None)),
            None => Some((Ok(Bytes::from(std::mem::take(&mut lines.buffer))), None)),
        }
    });
    let body: std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, axum::Error>> + Send>> =
        Box::pin(body);
    Response::from_parts(parts, Body::from_stream(body))
}

/// A response's bytes, split into lines while the message sought has not gone by.
struct Lines {
    buffer: Vec<u8>,
    /// Still looking for the message to rewrite.
    sought: bool,
    /// An SSE stream (else one JSON body, read whole up to [`PEEK`]).
    sse: bool,
}

impl Lines {
    /// The bytes to send for `chunk`.
    fn feed(&mut self, chunk: &[u8], rewrite: &mut dyn FnMut(&mut Value) -> bool) -> Bytes {
        if !self.sought {
            return Bytes::copy_from_slice(chunk);
        }
        self.buffer.extend_from_slice(chunk);
        let mut out = Vec::new();
        if !self.sse {
            // One JSON body: whole once it parses.
            if let Ok(mut message) = serde_json::from_slice::<Value>(&self.buffer) {
                if rewrite(&mut message) {
                    if let Ok(body) = serde_json::to_vec(&message) {
                        self.buffer = body;
                    }
                }
                self.sought = false;
                return Bytes::from(std::mem::take(&mut self.buffer));
            }
        } else {
            while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                out.extend(self.line(line, rewrite));
                if !self.sought {
                    out.append(&mut self.buffer);
                    break;
                }
            }
        }
        if self.buffer.len() > PEEK {
            // Too long to be the message sought: give up looking.
            self.sought = false;
            out.append(&mut self.buffer);
        }
        Bytes::from(out)
    }

    /// An SSE line, rewritten when it is the `data:` of the message sought.
    fn line(&mut self, line: Vec<u8>, rewrite: &mut dyn FnMut(&mut Value) -> bool) -> Vec<u8> {
        let Some(data) = line.strip_prefix(b"data:") else {
            return line;
        };
        let json = data.strip_prefix(b" ").unwrap_or(data);
        let Ok(mut message) = serde_json::from_slice::<Value>(json) else {
            return line;
        };
        if !rewrite(&mut message) {
            return line;
        }
        self.sought = false;
        let Ok(body) = serde_json::to_vec(&message) else {
            return line;
        };
        let mut out = b"data: ".to_vec();
        out.extend(body);
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Wire;

    #[test]
    fn an_sse_stream_is_rewritten_at_its_message_only() {
        let wire = Wire::new(true);
        let mut rewrite = move |m: &mut Value| match m.get_mut("result") {
            Some(r) if r.get("tools").is_some() => {
                wire.tools(r);
                true
            }
            _ => false,
        };
        let mut lines = Lines {
            buffer: Vec::new(),
            sought: true,
            sse: true,
        };
        let event =
            br#"data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"exec_command"}]}}"#;
        let mut out = lines.feed(b"id: 0\nretry: 3000\n\n", &mut rewrite).to_vec();
        // Split mid-line: nothing of it goes before its end.
        out.extend(lines.feed(&event[..20], &mut rewrite));
        out.extend(lines.feed(&event[20..], &mut rewrite));
        out.extend(lines.feed(b"\n\ndata: {\"later\":1}\n", &mut rewrite));
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("id: 0\nretry: 3000\n\ndata: {"), "{text}");
        assert!(text.contains(r#""taskSupport":"optional""#), "{text}");
        assert!(text.ends_with("\n\ndata: {\"later\":1}\n"), "{text}");
    }

    #[test]
    fn a_json_body_is_rewritten_whole() {
        let mut rewrite = |m: &mut Value| {
            m["seen"] = Value::Bool(true);
            true
        };
        let mut lines = Lines {
            buffer: Vec::new(),
            sought: true,
            sse: false,
        };
        let mut out = lines.feed(b"{\"a\":", &mut rewrite).to_vec();
        out.extend(lines.feed(b"1}", &mut rewrite));
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["seen"], true);
    }
}
