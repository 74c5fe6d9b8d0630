//! A call's limits through the store (SPEC §8's rule for bad input: an error naming the
//! field, nothing run): narrowed against the server's ceiling first, then checked against
//! what this machine's cgroups can apply (here, where the controllers are bound to cgroup
//! v1, nothing), so a limit is refused, never silently dropped.

use uexec_core::backend::local::{limits_probe, Controller};
use uexec_core::policy::{Limits, Widening};
use uexec_core::{ExecError, ExecRequest};

use crate::helpers::{exec, store_with};

/// Whether the kernel offers the memory controller to this process's cgroup.
fn memory_offered() -> bool {
    limits_probe()
        .into_iter()
        .any(|(c, verdict)| c == Controller::Memory && verdict.is_ok())
}

#[tokio::test]
async fn a_call_s_limit_is_narrowed_then_refused_where_it_cannot_be_applied() {
    let store = store_with(|c| {
        c.limits = Limits {
            memory_max: Some(1 << 30),
            ..Limits::default()
        }
    });
    let ran = std::env::temp_dir().join(format!("uexec-limits-ran-{}", std::process::id()));
    let _ = std::fs::remove_file(&ran);
    let asking = |bytes: u64| ExecRequest {
        limits: Limits {
            memory_max: Some(bytes),
            ..Limits::default()
        },
        ..exec(&format!("touch {}", ran.display()), 1000)
    };
    // Above the server's: a widening, whatever the machine.
    let e = store.exec_command(asking(2 << 30)).await.unwrap_err();
    assert!(
        matches!(
            &e,
            ExecError::Widening(Widening::Limit {
                field: "limits.memory_max",
                ..
            })
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "invalid arguments: limits.memory_max: 2 GiB is above this server's limit (1 GiB); a call may only lower it"
    );
    // Lower, but this process's sessions have no memory controller: refused, saying
    // whether the machine or the server is why (no start-up enabled it here).
    let e = store.exec_command(asking(256 << 20)).await.unwrap_err();
    let ExecError::Limit {
        field,
        reason,
        machine,
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(*field, "limits.memory_max");
    assert_eq!(*machine, !memory_offered(), "{reason}");
    assert!(!ran.exists(), "a refused limit ran its command");
    // Asking nothing, the session would get the server's ceiling: refused the same way.
    let e = store
        .exec_command(exec(&format!("touch {}", ran.display()), 1000))
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::Limit { .. }), "{e:?}");
    assert!(!ran.exists());
}
