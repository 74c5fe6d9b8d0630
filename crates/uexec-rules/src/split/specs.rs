//! How each wrapper takes its options: what `super::wrappers` skips to find the program it
//! runs.

/// How a wrapper takes its options.
pub(super) struct Spec {
    /// Short options followed by a value (`-n 5` or `-n5`).
    pub(super) short_value: &'static str,
    /// Short options alone.
    pub(super) short_flag: &'static str,
    pub(super) long_value: &'static [&'static str],
    pub(super) long_flag: &'static [&'static str],
    /// Positional words before the program (`timeout`'s duration).
    pub(super) positional: usize,
    /// `VAR=x` words before the program (`env`, `sudo`).
    pub(super) assignments: bool,
    /// `-N` numbers are options (`nice -10`).
    pub(super) numeric: bool,
}

const NONE: Spec = Spec {
    short_value: "",
    short_flag: "",
    long_value: &[],
    long_flag: &[],
    positional: 0,
    assignments: false,
    numeric: false,
};

pub(super) fn spec(program: &str) -> Option<Spec> {
    Some(match program {
        "timeout" => Spec {
            short_value: "sk",
            short_flag: "v",
            long_value: &["signal", "kill-after"],
            long_flag: &["preserve-status", "foreground", "verbose"],
            positional: 1,
            ..NONE
        },
        "nice" => Spec {
            short_value: "n",
            long_value: &["adjustment"],
            numeric: true,
            ..NONE
        },
        "nohup" | "builtin" | "unbuffer" | "fakeroot" | "chronic" | "rlwrap" => NONE,
        "strace" => Spec {
            short_value: "eopsPIabEXuUS",
            short_flag: "fFchiqrtTvVxyCDdkwzZn",
            long_value: &["output", "trace", "signal", "user", "string-limit"],
            ..NONE
        },
        "env" => Spec {
            short_value: "uC",
            short_flag: "i0v",
            long_value: &["unset", "chdir"],
            long_flag: &["ignore-environment", "null", "debug"],
            assignments: true,
            ..NONE
        },
        "command" => Spec {
            short_flag: "p",
            ..NONE
        },
        "exec" => Spec {
            short_value: "a",
            short_flag: "cl",
            ..NONE
        },
        "time" => Spec {
            short_value: "fo",
            short_flag: "pvqa",
            long_value: &["format", "output"],
            long_flag: &["portability", "verbose", "quiet", "append"],
            ..NONE
        },
        "xargs" => Spec {
            short_value: "ILnPsdEa",
            short_flag: "0rtpxileo",
            long_value: &[
                "arg-file",
                "delimiter",
                "eof",
                "replace",
                "max-lines",
                "max-args",
                "max-procs",
                "max-chars",
                "process-slot-var",
            ],
            long_flag: &[
                "null",
                "no-run-if-empty",
                "verbose",
                "interactive",
                "exit",
                "open-tty",
            ],
            ..NONE
        },
        "sudo" => Spec {
            short_value: "ugCDhpRrtTU",
            short_flag: "AbEHiKnPSs",
            long_value: &[
                "user",
                "group",
                "close-from",
                "chdir",
                "host",
                "prompt",
                "role",
                "type",
                "command-timeout",
                "other-user",
                "chroot",
            ],
            long_flag: &[
                "askpass",
                "background",
                "preserve-env",
                "set-home",
                "login",
                "non-interactive",
                "preserve-groups",
                "stdin",
                "shell",
                "reset-timestamp",
            ],
            assignments: true,
            ..NONE
        },
        "doas" => Spec {
            short_value: "uC",
            short_flag: "ns",
            ..NONE
        },
        "stdbuf" => Spec {
            short_value: "ioe",
            long_value: &["input", "output", "error"],
            ..NONE
        },
        "ionice" => Spec {
            short_value: "cn",
            short_flag: "t",
            long_value: &["class", "classdata"],
            long_flag: &["ignore"],
            ..NONE
        },
        "setsid" => Spec {
            short_flag: "cfw",
            long_flag: &["ctty", "fork", "wait"],
            ..NONE
        },
        "taskset" => Spec {
            short_flag: "ac",
            long_flag: &["all-tasks", "cpu-list"],
            positional: 1,
            ..NONE
        },
        "chrt" => Spec {
            short_value: "T",
            short_flag: "bdfiormRv",
            long_value: &["sched-runtime", "sched-period", "sched-deadline"],
            long_flag: &[
                "batch",
                "deadline",
                "fifo",
                "idle",
                "other",
                "rr",
                "reset-on-fork",
                "verbose",
            ],
            positional: 1,
            ..NONE
        },
        _ => return None,
    })
}
