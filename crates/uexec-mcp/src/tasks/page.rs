//! The one-time loopback page a password prompt is answered on: a URL-mode elicitation
//! (MCP) sends the person there, and what they type goes into the session's terminal, never
//! through the model, a log or a result.
//!
//! - **Where**: one listener per process, on 127.0.0.1 and a port the kernel picks, started
//!   the first time a page is needed. Each page is `http://127.0.0.1:PORT/p/TOKEN`, the token
//!   256 random bits (`/dev/urandom`).
//! - **What**: `GET` shows the prompt and a password field; `POST` (a form, `password=...`)
//!   types the answer and Enter into the session, once: the token is spent by its first
//!   `POST`, whatever comes of it. A page expires after [`PAGE_LIFE`], when the task that
//!   opened it drops it (a new question, the session's end), or when the session no longer
//!   waits at a password prompt.
//! - **Who**: only a request whose `Host` is `127.0.0.1:PORT` (a DNS-rebinding page names
//!   its own host), whose `Origin`, if any, is `http://127.0.0.1:PORT` (another site's form
//!   names its own), and whose `Sec-Fetch-Site`, if any, is `same-origin` or `none`. Pages
//!   are never cached, framed or sent a referrer.
//! - **Never kept**: the answer is read from the body, written to the terminal (which does
//!   not echo it: the prompt turned echo off) and its buffers zeroed; nothing here logs a
//!   body or a token.

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::OnceCell;
use uexec_core::SessionStore;

/// How long a page stays open unused.
pub const PAGE_LIFE: Duration = Duration::from_secs(600);
/// The largest body a `POST` may have.
const MAX_BODY: usize = 4096;

/// An open page; it is withdrawn when dropped.
pub struct Page {
    token: String,
    url: String,
    elicitation_id: String,
    server: Arc<Server>,
}

impl Page {
    /// `http://127.0.0.1:PORT/p/TOKEN`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The id of the elicitation that sends the person here.
    pub fn elicitation_id(&self) -> &str {
        &self.elicitation_id
    }

    /// Not used yet, and not expired.
    pub fn open(&self) -> bool {
        self.server
            .slots()
            .get(&self.token)
            .is_some_and(|s| s.opened.elapsed() < PAGE_LIFE)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.server.slots().remove(&self.token);
    }
}

/// Opens a page for the password prompt `prompt` of `store`'s session `session_id`.
pub async fn open(
    store: &Arc<SessionStore>,
    session_id: i32,
    prompt: &str,
) -> Result<Page, String> {
    let server = server().await?;
    let token = random_hex(32).map_err(|e| format!("no randomness for a page token: {e}"))?;
    let elicitation_id =
        random_hex(16).map_err(|e| format!("no randomness for an elicitation id: {e}"))?;
    server.slots().insert(
        token.clone(),
        Slot {
            store: Arc::downgrade(store),
            session_id,
            prompt: prompt.to_owned(),
            opened: Instant::now(),
        },
    );
    Ok(Page {
        url: format!("http://127.0.0.1:{}/p/{token}", server.addr.port()),
        token,
        elicitation_id,
        server,
    })
}

struct Slot {
    store: Weak<SessionStore>,
    session_id: i32,
    prompt: String,
    opened: Instant,
}

struct Server {
    addr: SocketAddr,
    slots: Mutex<HashMap<String, Slot>>,
}

impl Server {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The process's page listener, started at the first call.
async fn server() -> Result<Arc<Server>, String> {
    static SERVER: OnceCell<Result<Arc<Server>, String>> = OnceCell::const_new();
    SERVER.get_or_init(start).await.clone()
}

async fn start() -> Result<Arc<Server>, String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1 for password pages: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the password page listener has no address: {e}"))?;
    let server = Arc::new(Server {
        addr,
        slots: Mutex::default(),
    });
    let router = axum::Router::new()
        .route("/p/{token}", get(show).post(answer))
        .with_state(server.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::warn!("the password page listener stopped: {e}");
        }
    });
    Ok(server)
}

/// `GET /p/TOKEN`: the prompt and a password field.
async fn show(
    State(server): State<Arc<Server>>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = admitted(&server, &Method::GET, &headers) {
        return *refused;
    }
    let Some((session_id, prompt)) = live(&server, &token) else {
        return page(
            StatusCode::NOT_FOUND,
            "This page is used, expired or unknown.",
        );
    };
    let body = format!(
        "<p>Session {session_id} waits at a password prompt:</p><pre>{}</pre>\
         <form method=\"post\"><input type=\"password\" name=\"password\" autocomplete=\"off\" \
         autofocus aria-label=\"password\"> <button>Send</button></form>\
         <p>What you type goes to the session's terminal, followed by Enter. This page works once.</p>",
        escape(&prompt)
    );
    page(StatusCode::OK, &body)
}

/// `POST /p/TOKEN`: types the answer, once.
async fn answer(
    State(server): State<Arc<Server>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(refused) = admitted(&server, &Method::POST, &headers) {
        return *refused;
    }
    if live(&server, &token).is_none() {
        return page(
            StatusCode::NOT_FOUND,
            "This page is used, expired or unknown.",
        );
    }
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return page(StatusCode::PAYLOAD_TOO_LARGE, "That answer is too long.");
    };
    let mut bytes = bytes.to_vec();
    let Some(mut password) = form_field(&bytes, "password") else {
        bytes.fill(0);
        return page(StatusCode::BAD_REQUEST, "The form has no password field.");
    };
    bytes.fill(0);
    // Spent now, whatever comes of it: the page works once.
    let slot = server.slots().remove(&token);
    let Some(slot) = slot.filter(|s| s.opened.elapsed() < PAGE_LIFE) else {
        password.fill(0);
        return page(
            StatusCode::NOT_FOUND,
            "This page is used, expired or unknown.",
        );
    };
    let typed = match slot.store.upgrade() {
        Some(store) if store.prompt(slot.session_id).is_some_and(|p| p.secret) => {
            password.push(b'\n');
            let text = String::from_utf8_lossy(&password).into_owned();
            let sent = store.send_input(slot.session_id, &text, false).await;
            let mut text = text.into_bytes();
            text.fill(0);
            std::hint::black_box(&text);
            sent.is_ok()
        }
        _ => false,
    };
    password.fill(0);
    std::hint::black_box(&password);
    if typed {
        page(
            StatusCode::OK,
            "Sent to the session, followed by Enter. You can close this page.",
        )
    } else {
        page(
            StatusCode::CONFLICT,
            "The session no longer waits at that password prompt: nothing was typed.",
        )
    }
}

/// A request from this machine's browser for this listener, or a refusal.
fn admitted(server: &Server, method: &Method, headers: &HeaderMap) -> Result<(), Box<Response>> {
    let own = format!("127.0.0.1:{}", server.addr.port());
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if host != Some(own.as_str()) {
        return Err(Box::new(page(
            StatusCode::FORBIDDEN,
            "Refused: not this listener's host.",
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        if origin.to_str().ok() != Some(format!("http://{own}").as_str()) {
            return Err(Box::new(page(
                StatusCode::FORBIDDEN,
                "Refused: another site's page.",
            )));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|s| s.to_str().ok()) {
        if *method == Method::POST && !matches!(site, "same-origin" | "none") {
            return Err(Box::new(page(
                StatusCode::FORBIDDEN,
                "Refused: another site's page.",
            )));
        }
    }
    Ok(())
}

/// The session and prompt of an open page.
fn live(server: &Server, token: &str) -> Option<(i32, String)> {
    let mut slots = server.slots();
    let slot = slots.get(token)?;
    if slot.opened.elapsed() >= PAGE_LIFE {
        slots.remove(token);
        return None;
    }
    Some((slot.session_id, slot.prompt.clone()))
}

/// A small HTML page that is never cached, framed or sent a referrer.
fn page(status: StatusCode, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>uexec: a password prompt</title>\
         </head><body>{body}</body></html>"
    );
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The value of `name` in an `application/x-www-form-urlencoded` body, decoded.
fn form_field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    body.split(|b| *b == b'&').find_map(|pair| {
        let mut parts = pair.splitn(2, |b| *b == b'=');
        let key = parts.next()?;
        (percent_decode(key) == name.as_bytes())
            .then(|| percent_decode(parts.next().unwrap_or(b"")))
    })
}

/// `+` is a space, `%XX` a byte.
fn percent_decode(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    out
}

/// `<`, `>`, `&`, `"` and `'` as HTML entities.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `n` random bytes from the kernel, in hex.
fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded() {
        let body = b"other=1&password=p%40ss+w%C3%B6rd%21&x=";
        assert_eq!(
            form_field(body, "password").as_deref(),
            Some("p@ss wörd!".as_bytes())
        );
        assert_eq!(form_field(b"a=1", "password"), None);
        assert_eq!(percent_decode(b"50%").as_slice(), b"50%");
        assert_eq!(percent_decode(b"%zz").as_slice(), b"%zz");
    }

    #[test]
    fn a_page_expires() {
        let server = Server {
            addr: "127.0.0.1:1".parse().expect("an address"),
            slots: Mutex::default(),
        };
        let opened = |ago: Duration| Slot {
            store: Weak::new(),
            session_id: 1000,
            prompt: "Password: ".into(),
            opened: Instant::now()
                .checked_sub(ago)
                .expect("the clock goes back that far"),
        };
        server
            .slots()
            .insert("old".into(), opened(PAGE_LIFE + Duration::from_secs(1)));
        server.slots().insert("new".into(), opened(Duration::ZERO));
        assert_eq!(live(&server, "old"), None);
        assert!(server.slots().get("old").is_none(), "forgotten");
        assert_eq!(live(&server, "new"), Some((1000, "Password: ".into())));
    }

    #[test]
    fn prompts_are_escaped() {
        assert_eq!(escape("<b>\"x\"&'"), "&lt;b&gt;&quot;x&quot;&amp;&#39;");
    }
}
