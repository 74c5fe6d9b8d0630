//! Without a token, loopback means "this server's user", not "any user of this machine":
//! a request sent as `nobody` is refused on both faces, the same one sent as our own user
//! is served.

use crate::net_support::{mcp_http, request_as, serve};

#[test]
fn serve_without_a_token_refuses_another_local_user() {
    let server = serve(&[]);
    assert_eq!(request_as(None, &server.addr, "ws", None), "101");
    let other = request_as(Some("nobody"), &server.addr, "ws", None);
    assert!(other == "403" || other == "closed", "nobody got {other}");
}

#[test]
fn mcp_http_without_a_token_refuses_another_local_user() {
    let server = mcp_http(&["--http", "127.0.0.1:0"]);
    assert_eq!(request_as(None, &server.addr, "mcp", None), "200");
    let other = request_as(Some("nobody"), &server.addr, "mcp", None);
    assert!(other == "403" || other == "closed", "nobody got {other}");
}

#[test]
fn with_a_token_another_local_user_needs_it_too() {
    let server = mcp_http(&["--http", "127.0.0.1:0", "--token", "s3cret"]);
    assert_eq!(request_as(Some("nobody"), &server.addr, "mcp", None), "401");
}
