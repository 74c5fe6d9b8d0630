//! A command inherits nothing of uexec's but its stdio: not even an fd uexec got without
//! close-on-exec.

use crate::helpers::{exec, store};

#[tokio::test]
async fn an_fd_without_cloexec_does_not_reach_the_command() {
    let mut fds = [0; 2];
    // SAFETY: a plain pipe(2) (no O_CLOEXEC), closed below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let fd = fds[1];
    let store = store();
    let cmd = format!("if [ -e /proc/$$/fd/{fd} ]; then echo LEAKED; else echo CLEAN; fi");
    let s = store.exec_command(exec(&cmd, 2000)).await.unwrap();
    // SAFETY: closing the two fds made above.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert_eq!(s.exit_code(), Some(0));
    assert_eq!(s.output, "CLEAN\n");
}
