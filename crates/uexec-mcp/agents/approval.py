"""The approval stage through the real agents (issue 39): `uexec mcp --rules` and `--hooks`.

- `rules_deny`: a `.rules` file forbids `git push` with a justification; the model's script
  `echo before > marker; git push origin main` comes back refused, naming the rule, the part
  and the justification, and the marker was never written; `echo fine` then runs.
- `hook_block`: a PreToolUse command hook (matcher `exec_command`) exits 2 with a message on
  stderr when the command holds `rm -rf`: the model reads the message and nothing of the
  command ran; the next command passes the hook and runs.
- `rules_prompt` (interactive Claude Code): a `prompt` rule holds `touch`; uexec asks through
  Claude Code's form (on 2026-07-28, the call's input_required round), the person picks
  "run once" and the command runs; the record holds that one decision.

Each scenario's files (rules, hooks and their script) are written into a directory of its
own before the agent starts, and the flags naming them added to the server's command. After
the agent ended, `uexec audit --json` (the record under the run's HOME, the same the server
had) must hold each decision with its outcome; the checks on the files are run then too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Callable

from agents import ScreenStep
from mock_model import Call
from scenarios import Check, Scenario, exit_stated, has_line, has_text, plain_text

# After the agent ended: (the scenario's directory, the run's HOME, the uexec binary) ->
# None when it holds, else what is wrong.
After = Callable[[Path, Path, str], "str | None"]

PUSH_JUSTIFICATION = "pushing is for people, not agents"
TOUCH_JUSTIFICATION = "it writes files"
HOOK_MESSAGE = "guard.sh: no rm -rf from an agent"


def refused_naming(*wants: str) -> Check:
    """A refusal, as uexec words it, that names each of `wants` (the rule's file, the part,
    the justification) and says nothing ran."""
    def check(text: str) -> str | None:
        if "refused" not in text and "blocked" not in text:
            return "not a refusal"
        missing = [w for w in wants if w not in text]
        if missing:
            return "does not name " + ", ".join(repr(w) for w in missing)
        if "Nothing of the command ran" not in text:
            return "does not say nothing ran"
        return None
    check.__name__ = "refused, naming " + ", ".join(wants)
    return check


def audit_rows(uexec: str, home: Path) -> list[dict] | str:
    """`uexec audit --json` with `home` as HOME (as the server had it): its rows, or what
    went wrong."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    env["HOME"] = str(home)
    try:
        out = subprocess.run([uexec, "audit", "--json"], env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"uexec audit --json: {exc}"
    if out.returncode != 0:
        return f"uexec audit --json exited {out.returncode}: {out.stderr.strip()[:300]}"
    try:
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    except ValueError as exc:
        return f"uexec audit --json printed no JSON lines: {exc}"


def rows_match(rows: list[dict], want: list[tuple[str, str, str]]) -> str | None:
    """The record holds exactly `want`, in order: (decision, outcome, a regex on who decided)."""
    got = [(r.get("decision"), r.get("outcome"), r.get("by", "")) for r in rows]
    if len(got) != len(want) or any(g[0] != w[0] or g[1] != w[1] or not re.search(w[2], g[2] or "")
                                    for g, w in zip(got, want)):
        return f"recorded {got}, want {want}"
    return None


def audited(*want: tuple[str, str, str]) -> After:
    def check(_dir: Path, home: Path, uexec: str) -> str | None:
        rows = audit_rows(uexec, home)
        return rows if isinstance(rows, str) else rows_match(rows, list(want))
    check.__name__ = "audit: " + ", ".join(f"{d}/{o}" for d, o, _ in want)
    return check


def absent(name: str) -> After:
    def check(d: Path, _home: Path, _uexec: str) -> str | None:
        return f"{name} exists: the command ran" if (d / name).exists() else None
    check.__name__ = f"no {name}"
    return check


def present(name: str) -> After:
    def check(d: Path, _home: Path, _uexec: str) -> str | None:
        return None if (d / name).exists() else f"no {name}: the command did not run"
    check.__name__ = f"{name} exists"
    return check


def hook_saw(n: int) -> After:
    def check(d: Path, _home: Path, _uexec: str) -> str | None:
        try:
            seen = [json.loads(ln) for ln in (d / "guard.log").read_text().splitlines() if ln.strip()]
        except (OSError, ValueError) as exc:
            return f"guard.log: {exc}"
        events = {e.get("hook_event_name") for e in seen}
        return None if len(seen) == n and events == {"PreToolUse"} else f"the hook saw {len(seen)} events {events}, want {n} PreToolUse"
    check.__name__ = f"the hook ran {n} times"
    return check


# Claude Code 2.1.332 speaks the 2026-07-28 protocol to uexec (its debug log:
# "protocolEra":"modern"): the held call is answered with an input_required result carrying
# uexec's form (SEP-2322), Claude Code shows it, and its retry brings the person's answer.
# Claude Code 2.1.332's form for uexec's question (seen on its screen: the message, then
# "❯ * answer: ▸ not set" / "reason: not set" / "Accept  Decline", and "→ to expand"): → opens
# the answer's choices, Enter picks the first (run once), ↓ moves on to Accept (through the
# reason, left empty), Enter accepts.
FORM_RUN_ONCE = [
    ScreenStep(r"requests your input", "\x1b[C", "→ opens the answer's choices", shows=r"run once"),
    ScreenStep(r"run once", "\r", "Enter picks run once", shows=r"answer: run once"),
    ScreenStep(r"answer: run once", "\x1b[B", "↓ to Accept", shows=r"❯ Accept"),
    ScreenStep(r"❯ Accept", "\r", "Enter on Accept", gone=r"requests your input"),
]


def approval_scenarios(files: Path) -> list[Scenario]:
    """The scenarios, their files under `files/NAME/`."""
    deny, hook, prompt = files / "rules_deny", files / "hook_block", files / "rules_prompt"
    guard = "\n".join([
        "#!/bin/bash",
        "input=$(cat)",
        f"printf '%s\\n' \"$input\" >> '{hook}/guard.log'",
        "case \"$input\" in",
        f"  *'rm -rf'*) echo '{HOOK_MESSAGE}' >&2; exit 2 ;;",
        "esac",
        "exit 0",
        "",
    ])
    hooks = {"hooks": {"PreToolUse": [{"matcher": "exec_command", "hooks": [
        {"type": "command", "command": str(hook / "guard.sh"), "timeout": 10}]}]}}
    return [
        Scenario("rules_deny", [
            Call("exec_command", {"cmd": f"echo before > {deny}/marker; git push origin main"}, "echo; git push"),
            Call("exec_command", {"cmd": "echo fine"}, "echo fine"),
        ], [
            [refused_naming("forbidden by rule", "team.rules", 'prefix "git push"', "git push origin main",
                            PUSH_JUSTIFICATION)],
            [plain_text, has_line("fine"), exit_stated(0)],
        ], files={"team.rules": f'prefix_rule(\n    pattern = ["git", "push"],\n    decision = "forbidden",\n'
                                f'    justification = "{PUSH_JUSTIFICATION}",\n)\n'},
            server_flags=["--rules", str(deny / "team.rules")], directory=deny,
            after=[absent("marker"), audited(("forbidden", "refused", r"^rules$"), ("allow", "admitted", r"no rule"))]),
        Scenario("hook_block", [
            Call("exec_command", {"cmd": f"echo ran > {hook}/ran; rm -rf {hook}/victim"}, "echo; rm -rf"),
            Call("exec_command", {"cmd": "echo fine"}, "echo fine"),
        ], [
            [has_text(HOOK_MESSAGE), refused_naming()],
            [plain_text, has_line("fine"), exit_stated(0)],
        ], files={"guard.sh": guard, "hooks.json": json.dumps(hooks), "victim/keep": "keep\n"},
            server_flags=["--hooks", str(hook / "hooks.json")], directory=hook,
            after=[absent("ran"), present("victim/keep"), hook_saw(2),
                   audited(("forbidden", "refused", r"(?i)hook"), ("allow", "admitted", r"."))]),
        Scenario("rules_prompt", [
            Call("exec_command", {"cmd": f"touch {prompt}/made; echo made-it"}, "touch (held)"),
        ], [
            [plain_text, has_line("made-it"), exit_stated(0)],
        ], agents=("claude-tty",), screen_steps=FORM_RUN_ONCE,
            files={"team.rules": f'prefix_rule(\n    pattern = ["touch"],\n    decision = "prompt",\n'
                                 f'    justification = "{TOUCH_JUSTIFICATION}",\n)\n'},
            server_flags=["--rules", str(prompt / "team.rules"), "--approval-timeout", "5s"], directory=prompt,
            after=[present("made"), audited(("prompt", "admitted", r"(?i)person"))], timeout=20),
    ]


def write_files(sc: Scenario) -> None:
    """The scenario's files in its directory (a script, `#!` first, executable)."""
    if sc.directory is None:
        return
    for name, body in sc.files.items():
        path = sc.directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        if body.startswith("#!"):
            path.chmod(0o755)
