//! A tmux server of a test's own (`tmux -L NAME -f /dev/null`: no user's config): a person's
//! terminal, typed into with send-keys and read with capture-pane. It goes with its test.

use std::path::Path;
use std::process::Command;

use crate::helpers::rand_suffix;

pub struct Tmux {
    server: String,
}

impl Tmux {
    /// A server named after `kind` (nothing starts until the first `new-session`).
    pub fn new(kind: &str) -> Self {
        Self {
            server: format!("uexec-{kind}-{}", rand_suffix()),
        }
    }

    /// Its one window, `t`, of `width`x`height`, running `command` in `cwd`.
    pub fn start(&self, (width, height): (u16, u16), cwd: &Path, command: &str) {
        let (width, height, cwd) = (width.to_string(), height.to_string(), cwd.display());
        self.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &width,
            "-y",
            &height,
            "-c",
            &cwd.to_string(),
            command,
        ]);
    }

    /// Presses keys in the window (tmux names: `C-c`, `Enter`) or types words.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// `tmux ARGS` on this server: what it printed.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.server, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.server, "kill-server"])
            .output();
    }
}
