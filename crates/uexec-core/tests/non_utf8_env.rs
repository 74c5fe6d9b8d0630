//! A variable of uexec's environment that is not UTF-8 (a Latin-1 `PWD`, say) reaches the
//! command byte for byte instead of panicking the call. A test binary of its own: it changes
//! the process environment.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

#[tokio::test]
async fn a_latin1_variable_passes_byte_for_byte() {
    // SAFETY (edition 2021: safe fn): set before any other thread of this binary reads it.
    std::env::set_var("UEXEC_TEST_LATIN1", OsString::from_vec(b"caf\xe9".to_vec()));
    let store = common::sh_store();
    let s = store
        .exec_command(common::exec(
            r#"printf %s "$UEXEC_TEST_LATIN1" | od -An -tx1"#,
            false,
            5000,
        ))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    assert_eq!(
        s.output.split_whitespace().collect::<Vec<_>>(),
        ["63", "61", "66", "e9"]
    );
}
