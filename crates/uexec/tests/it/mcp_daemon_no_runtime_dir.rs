//! A plain `uexec mcp` whose daemon's socket directory cannot be made (the temp dir out of
//! inodes, no runtime dir) serves in-process, saying why on stderr, as when no daemon can
//! be reached: it exited 1 before `initialize` (issue 38 §5).

use crate::helpers::on_a_full_disk;

#[test]
fn no_socket_directory_serves_in_process_and_says_why() {
    let said = on_a_full_disk(
        r#"mkdir "$1/tmp" && mount -t tmpfs -o size=64k,nr_inodes=1 tmpfs "$1/tmp"
mkdir "$1/tmp/probe" 2>/dev/null && echo "the temp dir has inodes left"
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}' \
  | env -u XDG_RUNTIME_DIR HOME="$1/home" TMPDIR="$1/tmp" "$2" mcp 2>&1
echo "rc=$?""#,
    );
    assert!(!said.contains("inodes left"), "{said}");
    assert!(said.contains("rc=0"), "{said}");
    assert!(
        said.contains(r#""id":1"#) && said.contains(r#""serverInfo""#),
        "initialize was answered: {said}"
    );
    // Why, on stderr: which directory, what failed, and where the sessions are kept.
    assert!(said.contains("uexec-0"), "{said}");
    assert!(said.contains("No space left on device"), "{said}");
    assert!(said.contains("keeps its sessions itself"), "{said}");
}
