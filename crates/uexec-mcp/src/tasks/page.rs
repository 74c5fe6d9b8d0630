//! The one-time loopback page a password prompt is answered on: a URL-mode elicitation
//! (MCP) sends the person there, and what they type goes into the session's terminal, never
//! through the model, a log or a result.
//!
//! - **Where**: on 127.0.0.1 and a port the kernel picks, listening only while a page is
//!   open: started when the first page opens, closed once none is (each used, expired or
//!   withdrawn), so a later page may have another port. Each page is
//!   `http://127.0.0.1:PORT/p/TOKEN`, the token 256 random bits (`/dev/urandom`). It is
//!   served by the hardened accept loop of uexec's other listeners
//!   ([`uexec_net::HttpListener`]): a header-read timeout, at most
//!   [`MAX_PAGE_CONNECTIONS`] connections at once (those beyond are closed at once: the
//!   daemon's fds are not another user's to take), back-off when the fds run out.
//! - **What**: `GET` shows the prompt and a password field; `POST` (a form, `password=...`)
//!   types the answer and Enter into the session, once: the token is spent by its first
//!   `POST` that carries an answer which can be typed, whatever comes of it. An answer that
//!   holds a control character (a line break would type a second line, a command, into the
//!   session) or is not UTF-8 is refused (`400`): nothing is typed and the page still
//!   works. A page expires after [`PAGE_LIFE`], when the task that opened it drops it (a
//!   new question, the session's end), or when the session no longer waits at a password
//!   prompt.
//! - **Who**: only this user, outside every sandbox: a connection from another uid, or
//!   from a sandboxed command of this one, is refused before a byte of it is read, with
//!   the peer check of uexec's other token-less loopback listeners ([`uexec_net::peer`]);
//!   a URL handed to a browser sits in a command line every user can read. Then only a
//!   request whose `Host` is `127.0.0.1:PORT` (a DNS-rebinding page names its own host),
//!   whose `Origin`, if any, is `http://127.0.0.1:PORT` (another site's form names its
//!   own), and whose `Sec-Fetch-Site`, if any, is `same-origin` or `none`. Pages are never
//!   cached, framed or sent a referrer.
//! - **Never kept**: the answer is read from the body, written to the terminal (which does
//!   not echo it: the prompt turned echo off) and its buffers zeroed; nothing here logs a
//!   body or a token.

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use tokio_util::sync::CancellationToken;
use uexec_core::SessionStore;
use uexec_net::{Admit, HttpListener, ListenerOptions, LocalUser, Peer};

/// How long a page stays open unused.
pub const PAGE_LIFE: Duration = Duration::from_secs(600);
/// Most connections the page listener serves at once (a browser opens a few).
pub const MAX_PAGE_CONNECTIONS: usize = 16;
/// Longest wait for a request's headers, and for a `POST`'s body.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
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
            .open
            .get(&self.token)
            .is_some_and(|s| s.opened.elapsed() < PAGE_LIFE)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.server.take(&self.token);
    }
}

/// Opens a page for the password prompt `prompt` of `store`'s session `session_id`: on the
/// listener already open, else on a new one.
pub async fn open(
    store: &Arc<SessionStore>,
    session_id: i32,
    prompt: &str,
) -> Result<Page, String> {
    let token = random_hex(32).map_err(|e| format!("no randomness for a page token: {e}"))?;
    let elicitation_id =
        random_hex(16).map_err(|e| format!("no randomness for an elicitation id: {e}"))?;
    let slot = Slot {
        store: Arc::downgrade(store),
        session_id,
        prompt: prompt.to_owned(),
        opened: Instant::now(),
    };
    let listening = current().upgrade();
    let slot = match listening {
        Some(server) => match server.insert(&token, slot) {
            Ok(()) => return Ok(Page::on(server, token, elicitation_id)),
            // Closed since: its last page went.
            Err(slot) => slot,
        },
        None => slot,
    };
    let server = start(&token, slot).await?;
    *current() = Arc::downgrade(&server);
    Ok(Page::on(server, token, elicitation_id))
}

impl Page {
    /// The page `token` of `server`, withdrawn after [`PAGE_LIFE`] if nothing took it before.
    fn on(server: Arc<Server>, token: String, elicitation_id: String) -> Self {
        let expiring = (Arc::downgrade(&server), token.clone());
        tokio::spawn(async move {
            tokio::time::sleep(PAGE_LIFE).await;
            if let Some(server) = expiring.0.upgrade() {
                server.take(&expiring.1);
            }
        });
        Self {
            url: format!("http://127.0.0.1:{}/p/{token}", server.addr.port()),
            token,
            elicitation_id,
            server,
        }
    }
}

struct Slot {
    store: Weak<SessionStore>,
    session_id: i32,
    prompt: String,
    opened: Instant,
}

/// One listener and its open pages.
struct Server {
    addr: SocketAddr,
    slots: Mutex<Slots>,
    /// Cancelled once no page is open: the listener closes.
    stop: CancellationToken,
}

#[derive(Default)]
struct Slots {
    open: HashMap<String, Slot>,
    /// No page is open any more, and the listener closed: none opens here again.
    closed: bool,
}

impl Server {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens page `token` here, unless this listener closed.
    fn insert(&self, token: &str, slot: Slot) -> Result<(), Slot> {
        let mut slots = self.slots();
        if slots.closed {
            return Err(slot);
        }
        slots.open.insert(token.to_owned(), slot);
        Ok(())
    }

    /// Takes page `token` away (used, expired or withdrawn); the last one closes the
    /// listener.
    fn take(&self, token: &str) -> Option<Slot> {
        let mut slots = self.slots();
        let slot = slots.open.remove(token);
        if slots.open.is_empty() && !slots.closed {
            slots.closed = true;
            self.stop.cancel();
        }
        slot
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The listener pages open on while it is open.
fn current() -> MutexGuard<'static, Weak<Server>> {
    static CURRENT: Mutex<Weak<Server>> = Mutex::new(Weak::new());
    CURRENT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A new listener, with page `token` open on it.
async fn start(token: &str, slot: Slot) -> Result<Arc<Server>, String> {
    let options = ListenerOptions {
        tls: None,
        header_read_timeout: READ_TIMEOUT,
        max_connections: MAX_PAGE_CONNECTIONS,
        admit: Admit::OwnUser,
    };
    let listener = HttpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1 for password pages: {e}"))?;
    let server = Arc::new(Server {
        addr: listener.local_addr(),
        slots: Mutex::new(Slots {
            open: HashMap::from([(token.to_owned(), slot)]),
            closed: false,
        }),
        stop: CancellationToken::new(),
    });
    let router = axum::Router::new()
        .route("/p/{token}", get(show).post(answer))
        .with_state(server.clone());
    let stop = server.stop.clone();
    tokio::spawn(listener.serve(router, stop.cancelled_owned()));
    Ok(server)
}

/// `GET /p/TOKEN`: the prompt and a password field.
async fn show(
    State(server): State<Arc<Server>>,
    Path(token): Path<String>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = admitted(&server, peer, &Method::GET, &headers).await {
        return *refused;
    }
    let Some((session_id, prompt)) = live(&server, &token) else {
        return gone();
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
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(refused) = admitted(&server, peer, &Method::POST, &headers).await {
        return *refused;
    }
    if live(&server, &token).is_none() {
        return gone();
    }
    let bytes = match tokio::time::timeout(READ_TIMEOUT, to_bytes(body, MAX_BODY)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return page(StatusCode::PAYLOAD_TOO_LARGE, "That answer is too long."),
        Err(_) => return page(StatusCode::REQUEST_TIMEOUT, "The answer did not arrive."),
    };
    let mut bytes = bytes.to_vec();
    let Some(mut password) = form_field(&bytes, "password") else {
        bytes.fill(0);
        return page(StatusCode::BAD_REQUEST, "The form has no password field.");
    };
    bytes.fill(0);
    std::hint::black_box(&bytes);
    // Not spent: the person may type it again.
    if let Some(why) = untypable(&password) {
        password.fill(0);
        std::hint::black_box(&password);
        return page(
            StatusCode::BAD_REQUEST,
            &format!("{why}: nothing was typed. This page still works."),
        );
    }
    // Spent now, whatever comes of it: the page works once.
    let slot = server.take(&token);
    let Some(slot) = slot.filter(|s| s.opened.elapsed() < PAGE_LIFE) else {
        password.fill(0);
        return gone();
    };
    let typed = match slot.store.upgrade() {
        Some(store) if store.prompt(slot.session_id).is_some_and(|p| p.secret) => {
            // UTF-8 (`untypable` said so), and room for the Enter: no copy is left behind.
            password.push(b'\n');
            let text = String::from_utf8(password).unwrap_or_default();
            let sent = store.send_input(slot.session_id, &text, false).await;
            password = text.into_bytes();
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

/// Why `answer` cannot be typed, if it cannot: a control character would do more than
/// answer (a line break types a second line, a command, after the password; Ctrl-C, Ctrl-D,
/// Ctrl-U or an escape sequence act on the terminal), and bytes that are not UTF-8 would
/// not be what the person typed.
fn untypable(answer: &[u8]) -> Option<&'static str> {
    match std::str::from_utf8(answer) {
        Err(_) => Some("The answer is not UTF-8"),
        Ok(text) if text.chars().any(char::is_control) => Some(
            "The answer holds a control character (a line break, a tab, an escape...), \
             which would do more than answer the prompt",
        ),
        Ok(_) => None,
    }
}

/// A request of this user from this machine's browser for this listener, or a refusal.
async fn admitted(
    server: &Server,
    peer: Option<Extension<Peer>>,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), Box<Response>> {
    // The listener admitted the connection already ([`Admit::OwnUser`]); looked up once
    // per connection, this costs nothing more.
    let user = match peer {
        Some(Extension(peer)) => peer.user().await,
        None => LocalUser::Unknown,
    };
    if user != LocalUser::Same {
        return Err(Box::new(page(
            StatusCode::FORBIDDEN,
            "Refused: only this server's own user may use this page.",
        )));
    }
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
    let expired = {
        let slots = server.slots();
        let slot = slots.open.get(token)?;
        if slot.opened.elapsed() < PAGE_LIFE {
            return Some((slot.session_id, slot.prompt.clone()));
        }
        true
    };
    if expired {
        server.take(token);
    }
    None
}

/// The answer for a page that is not open.
fn gone() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "This page is used, expired or unknown.",
    )
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
    // Room for the Enter `answer` adds: no copy of a password is left behind by a growth.
    let mut out = Vec::with_capacity(text.len() + 1);
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

    fn opened(ago: Duration) -> Slot {
        Slot {
            store: Weak::new(),
            session_id: 1000,
            prompt: "Password: ".into(),
            opened: Instant::now()
                .checked_sub(ago)
                .expect("the clock goes back that far"),
        }
    }

    fn server() -> Server {
        Server {
            addr: "127.0.0.1:1".parse().expect("an address"),
            slots: Mutex::default(),
            stop: CancellationToken::new(),
        }
    }

    #[test]
    fn a_page_expires() {
        let server = server();
        let old = opened(PAGE_LIFE + Duration::from_secs(1));
        assert!(server.insert("old", old).is_ok());
        assert!(server.insert("new", opened(Duration::ZERO)).is_ok());
        assert_eq!(live(&server, "old"), None);
        assert!(!server.slots().open.contains_key("old"), "forgotten");
        assert_eq!(live(&server, "new"), Some((1000, "Password: ".into())));
    }

    #[test]
    fn the_listener_closes_with_its_last_page() {
        let server = server();
        assert!(server.insert("a", opened(Duration::ZERO)).is_ok());
        assert!(server.insert("b", opened(Duration::ZERO)).is_ok());
        assert!(server.take("a").is_some());
        assert!(!server.stop.is_cancelled(), "page b is open");
        assert!(server.take("b").is_some());
        assert!(server.stop.is_cancelled(), "no page is open");
        assert!(
            server.insert("c", opened(Duration::ZERO)).is_err(),
            "a closed listener opens no page"
        );
    }

    #[test]
    fn an_answer_with_a_control_character_is_not_typed() {
        assert_eq!(untypable(b"hunter2 x"), None);
        assert_eq!(untypable("pässwörd€".as_bytes()), None);
        for bad in [
            &b"pw\necho INJECTED"[..],
            b"pw\r",
            b"pw\x03",
            b"pw\x04",
            b"\x1b[A",
            b"pw\x7f",
            b"pw\0",
            b"pw\t",
            "pw\u{85}".as_bytes(),
            b"pw\xff",
        ] {
            assert!(untypable(bad).is_some(), "{bad:?} typed");
        }
    }

    #[test]
    fn prompts_are_escaped() {
        assert_eq!(escape("<b>\"x\"&'"), "&lt;b&gt;&quot;x&quot;&amp;&#39;");
    }
}
