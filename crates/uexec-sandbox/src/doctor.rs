//! `uexec doctor`: what this machine supports of the sandbox, facility by facility, each
//! tried for real (in a throwaway child) rather than guessed from sysctls. Must run in a
//! single-threaded process (the binary calls it before starting its runtime).

/// One kernel facility and whether it works here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facility {
    /// Machine name (`user_namespaces`).
    pub key: &'static str,
    /// Human name (`user namespaces`).
    pub name: &'static str,
    /// `Ok(detail)` when usable, `Err(why)` when not.
    pub verdict: Result<String, String>,
}

/// Tries every facility the sandbox uses.
#[cfg(target_os = "linux")]
pub fn check() -> Vec<Facility> {
    use super::launcher::in_child;
    let ok = |r: Result<(), String>| r.map(|()| String::new());
    let ids = uexec_sys::real_ids();
    let map_ids = move || -> std::io::Result<()> {
        std::fs::write("/proc/self/setgroups", "deny")?;
        std::fs::write("/proc/self/uid_map", format!("{0} {0} 1", ids.0))?;
        std::fs::write("/proc/self/gid_map", format!("{0} {0} 1", ids.1))
    };
    let with_user = move |extra: libc::c_int| {
        in_child(move || {
            uexec_sys::unshare(libc::CLONE_NEWUSER | extra)?;
            map_ids()
        })
    };
    let mut facilities = vec![
        Facility {
            key: "landlock",
            name: "Landlock",
            verdict: uexec_sys::landlock_abi()
                .map(|abi| format!("ABI {abi}"))
                .map_err(|e| e.to_string()),
        },
        Facility {
            key: "user_namespaces",
            name: "user namespaces (unprivileged)",
            verdict: ok(with_user(0)),
        },
        Facility {
            key: "pid_namespaces",
            name: "pid namespaces",
            verdict: ok(with_user(libc::CLONE_NEWPID)),
        },
        Facility {
            key: "mount_namespaces",
            name: "mount namespaces",
            verdict: ok(in_child(move || {
                uexec_sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)?;
                map_ids()?;
                uexec_sys::make_mounts_private()
            })),
        },
        Facility {
            key: "network_namespaces",
            name: "network namespaces",
            verdict: ok(in_child(move || {
                uexec_sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)?;
                map_ids()?;
                uexec_sys::loopback_up()
            })),
        },
        Facility {
            key: "seccomp",
            name: "seccomp filters",
            verdict: ok(in_child(|| {
                super::seccomp::install(true, true).map_err(std::io::Error::other)
            })),
        },
        Facility {
            key: "cgroups",
            name: "a cgroup v2 per session (sandboxed or not: terminate kills every descendant)",
            verdict: uexec_core::backend::local::cgroup_probe()
                .map(|dir| format!("under {}", dir.display())),
        },
        Facility {
            key: "spawn_into_cgroup",
            name: "commands born in their session's cgroup (clone3 with CLONE_INTO_CGROUP)",
            verdict: uexec_core::backend::local::cgroup_entry_probe()
                .map(|()| String::new())
                .map_err(|why| {
                    format!(
                        "{why}; each command moves itself in instead, which costs \
                         milliseconds after an idle pause"
                    )
                }),
        },
    ];
    facilities.extend(limits());
    facilities
}

/// One line per limit flag: whether the kernel offers its controller to uexec's cgroup.
#[cfg(target_os = "linux")]
fn limits() -> Vec<Facility> {
    use uexec_core::backend::local::{limits_probe, Controller};
    limits_probe()
        .into_iter()
        .map(|(controller, verdict)| {
            let (key, name) = match controller {
                Controller::Memory => (
                    "cgroup_memory",
                    "limits: --memory-max (the memory controller)",
                ),
                Controller::Pids => ("cgroup_pids", "limits: --pids-max (the pids controller)"),
                Controller::Cpu => ("cgroup_cpu", "limits: --cpu-max (the cpu controller)"),
            };
            Facility { key, name, verdict }
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
pub fn check() -> Vec<Facility> {
    Vec::new()
}

/// The report as text (one line per facility, then what the profiles get) or as JSON.
pub fn render(facilities: &[Facility], json: bool) -> String {
    if json {
        let fields: Vec<String> = facilities
            .iter()
            .map(|f| match &f.verdict {
                Ok(detail) => format!(
                    "\"{}\":{{\"available\":true,\"detail\":{}}}",
                    f.key,
                    json_string(detail)
                ),
                Err(why) => format!(
                    "\"{}\":{{\"available\":false,\"error\":{}}}",
                    f.key,
                    json_string(why)
                ),
            })
            .collect();
        return format!("{{{}}}\n", fields.join(","));
    }
    let mut out = String::from("uexec sandbox support on this machine:\n");
    for f in facilities {
        match &f.verdict {
            Ok(detail) if detail.is_empty() => out.push_str(&format!("  {}: yes\n", f.name)),
            Ok(detail) => out.push_str(&format!("  {}: yes ({detail})\n", f.name)),
            Err(why) => out.push_str(&format!("  {}: NO ({why})\n", f.name)),
        }
    }
    // Cgroups are no sandbox layer: without them, sessions live on process groups.
    let all = facilities
        .iter()
        .filter(|f| !f.key.starts_with("cgroup") && f.key != "spawn_into_cgroup")
        .all(|f| f.verdict.is_ok());
    out.push_str(if all {
        "Every sandbox profile (read-only, workspace-write, network off) can be enforced here.\n"
    } else {
        "Sandboxed commands are refused unless the fallback is best-effort (which runs without the missing layers).\n"
    });
    if facilities
        .iter()
        .any(|f| f.key == "cgroups" && f.verdict.is_err())
    {
        out.push_str("Sessions live on process groups: a descendant that leaves its group (setsid, a double fork) outlives a terminate.\n");
    }
    let cgroups = |key: &str| facilities.iter().any(|f| f.key == key && f.verdict.is_ok());
    if cgroups("cgroups") && !cgroups("spawn_into_cgroup") {
        out.push_str("This kernel cannot start a command in its cgroup (Linux 5.7 and clone3 are needed, and a seccomp filter may refuse clone3): each command moves itself in, which costs milliseconds on a call after an idle pause.\n");
    }
    let missing: Vec<&str> = facilities
        .iter()
        .filter(|f| f.key.starts_with("cgroup_") && f.verdict.is_err())
        .map(|f| match f.key {
            "cgroup_memory" => "--memory-max",
            "cgroup_pids" => "--pids-max",
            _ => "--cpu-max",
        })
        .collect();
    if !missing.is_empty() {
        out.push_str(&format!(
            "Limits need their cgroup v2 controller: {} would be refused at start-up (and a call's `limits` refused).\n",
            missing.join(", ")
        ));
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_text_and_json() {
        let facilities = [
            Facility {
                key: "landlock",
                name: "Landlock",
                verdict: Ok("ABI 7".into()),
            },
            Facility {
                key: "seccomp",
                name: "seccomp filters",
                verdict: Err("Operation \"not\" permitted".into()),
            },
        ];
        let text = render(&facilities, false);
        assert!(text.contains("Landlock: yes (ABI 7)"), "{text}");
        assert!(text.contains("seccomp filters: NO"), "{text}");
        assert_eq!(
            render(&facilities, true),
            "{\"landlock\":{\"available\":true,\"detail\":\"ABI 7\"},\"seccomp\":{\"available\":false,\"error\":\"Operation \\\"not\\\" permitted\"}}\n"
        );
    }

    /// A kernel that cannot start a command in its cgroup is said to, as a cost of the
    /// cgroups, not a missing sandbox layer.
    #[test]
    fn a_kernel_that_cannot_spawn_into_cgroups_is_named_apart_from_the_sandbox() {
        let facility = |key, verdict| Facility {
            key,
            name: key,
            verdict,
        };
        let mut facilities = vec![
            facility("landlock", Ok(String::new())),
            facility("cgroups", Ok(String::new())),
            facility("spawn_into_cgroup", Err("Function not implemented".into())),
        ];
        let text = render(&facilities, false);
        assert!(
            text.contains("spawn_into_cgroup: NO (Function not implemented"),
            "{text}"
        );
        assert!(text.contains("Every sandbox profile"), "{text}");
        assert!(
            text.contains("cannot start a command in its cgroup"),
            "{text}"
        );
        facilities[2].verdict = Ok(String::new());
        let text = render(&facilities, false);
        assert!(!text.contains("cannot start a command"), "{text}");
        assert!(!text.contains("Limits need"), "{text}");
    }
}
