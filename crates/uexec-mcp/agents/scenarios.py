"""The scenarios: what the scripted model calls, and what it must get back through each agent.

What is asserted is the experience issue 24 builds, as the model sees it after the agent
has turned uexec's MCP result into a tool result:

- output arrives as the lines a terminal shows (`42` is a line of its own), never wrapped
  in a JSON object with `\\r\\n` and `\\"` escapes;
- a running command's session id is stated in words (`session ID 7`), as is an exit code
  (`exited with code 0`);
- polling an unknown session is a clear error naming it;
- a command still running when the agent exits does not survive it.

Each check is a pure function of the text the agent handed back, so it can be read (and
fails) without running anything.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agents import ScreenStep
from mock_model import NOTIFICATION, SID, Call

SESSION_STATED = re.compile(r"(?i)session[ _]id[ :=#]*(\d+)")
EXIT_STATED = re.compile(r"(?i)(?:exited with code|exit[ _]code)[ :=]*(-?\d+)")
# What a JSON string does to terminal output: \r \n \t \" \\ and \u escapes.
JSON_ESCAPES = re.compile(r'\\[rnt"\\]|\\u[0-9a-fA-F]{4}')
UNKNOWN_WORDS = re.compile(r"(?i)unknown|no such|not found|does not exist|invalid|no session")

Check = Callable[[str], "str | None"]  # None when it holds, else what is wrong


def lines_of(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


def plain_text(text: str) -> str | None:
    for line in lines_of(text):
        s = line.strip()
        if s.startswith("{") and s.endswith("}"):
            try:
                if isinstance(json.loads(s), dict):
                    return f"a line is a JSON object: {s[:80]}"
            except ValueError:
                pass
    m = JSON_ESCAPES.search(text)
    if m:
        return f"JSON escape {m.group(0)!r} in the text"
    return None


def has_line(want: str) -> Check:
    def check(text: str) -> str | None:
        return None if want in lines_of(text) else f"no line {want!r}"
    check.__name__ = f"line {want!r}"
    return check


def session_stated(text: str) -> str | None:
    return None if SESSION_STATED.search(text) else "no session id in words"


def exit_stated(code: int | None = None) -> Check:
    def check(text: str) -> str | None:
        m = EXIT_STATED.search(text)
        if not m:
            return "no exit code in words"
        if code is not None and int(m.group(1)) != code:
            return f"exit code {m.group(1)}, want {code}"
        return None
    check.__name__ = "exit code stated" if code is None else f"exit code {code}"
    return check


TERMINATED_WORDS = re.compile(r"(?i)terminat|kill|stopped|ended")


def terminated(text: str) -> str | None:
    return None if TERMINATED_WORDS.search(text) else "does not say the session was ended"


def unknown_session_error(sid: int) -> Check:
    def check(text: str) -> str | None:
        if str(sid) not in text:
            return f"the error does not name session {sid}"
        if not UNKNOWN_WORDS.search(text):
            return "the error does not say the session is unknown"
        return None
    check.__name__ = "clear unknown-session error"
    return check


def has_text(want: str) -> Check:
    def check(text: str) -> str | None:
        return None if want in text else f"no {want!r}"
    check.__name__ = f"says {want!r}"
    return check


def names_no_session(text: str) -> str | None:
    """A task's start as Claude Code tells it (`started server-side task`) is no session id."""
    return None if not SESSION_STATED.search(text) else "a session id where a task was expected"


def task_started(text: str) -> str | None:
    """The call became a task the agent runs in the background and will notify of (Claude
    Code: `started server-side task ... moved to the background ... you'll receive a
    notification`), with no session id: not an error, not a snapshot."""
    if SESSION_STATED.search(text):
        return "a session id where a task was expected"
    if not re.search(r"(?i)\btask\b", text) or not re.search(r"(?i)notification", text):
        return "not a task the agent will notify of"
    return None


def task_notification(text: str) -> str | None:
    """The agent's turn brought a task notification that says the task completed."""
    if "<task-notification>" not in text:
        return "no <task-notification> in the agent's next turn"
    if not re.search(r"<status>completed</status>", text):
        m = re.search(r"<status>([^<]*)</status>", text)
        return f"the task's status is {m.group(1) if m else 'not stated'}, not completed"
    return None


def result_of_notification(check: Check) -> Check:
    """`check` on the notification's <result> alone (what uexec said), not Claude Code's
    framing around it."""
    def wrapped(text: str) -> str | None:
        m = re.search(r"<result>\n?(.*?)\n?</result>", text, re.S)
        return check(m.group(1) if m else text)
    wrapped.__name__ = check.__name__
    return wrapped


# A duration of the run: `Wall time: 3.0 seconds`, `after 3.0 s`, `"wall_time_seconds":3.0`.
DURATIONS = re.compile(r"(?i)wall[ _]time(?:_seconds)?\"?[ :=]*([0-9.]+)|\bafter ([0-9.]+) ?s\b")


def wall_time_at_least(seconds: float) -> Check:
    """Some duration the text states is the whole run's (a task's result may also give its
    last window's)."""
    def check(text: str) -> str | None:
        found = [float(a or b) for a, b in DURATIONS.findall(text) if (a or b).replace(".", "", 1).isdigit()]
        if not found:
            return "no wall time"
        if max(found) < seconds:
            return f"wall time {max(found)} s, the run took over {seconds} s"
        return None
    check.__name__ = f"wall time >= {seconds} s"
    return check


SESSION_NAMED = re.compile(r"(?i)\bsession(?:[ _]id)?[ :=#]*(\d+)")


def session_named(text: str) -> str | None:
    """A session id in words, as a result states it (`session ID 7`) or names the session
    (`Session 7 (cmd) exited`)."""
    return None if SESSION_NAMED.search(text) else "no session id in words"


session_named.__name__ = "session id stated"


def transcript_named(text: str) -> str | None:
    return None if re.search(r"(?i)transcript\S*[\"]?[ :=]+[\"]?/", text) else "no transcript path"


plain_text.__name__ = "plain text"
task_started.__name__ = "a task, notified later"
task_notification.__name__ = "task notification: completed"
transcript_named.__name__ = "transcript path"
session_stated.__name__ = "session id stated"


@dataclass
class Scenario:
    name: str
    calls: list[Call]
    # Checks per call, by position in calls.
    checks: list[list[Check]]
    # A marker in the commands that must not survive the agent (scenario left_running).
    survivor_marker: str | None = None
    prompt: str = "Run the scripted uexec scenario."
    notes: list[str] = field(default_factory=list)
    # Which agents play it (some flags exist in one agent only; tasks in interactive Claude
    # Code only).
    agents: tuple[str, ...] = ("claude", "codex", "claude-tty")
    # What the person does on interactive Claude Code's screen meanwhile (a form's answer).
    screen_steps: list[ScreenStep] = field(default_factory=list)
    # A secret the person types that no request to the model may carry.
    secret: str | None = None
    # Claude Code's tool flags instead of `--tools ""` (no built-in tools).
    claude_tools: list[str] | None = None
    # Checks of the tool names the agent offered the model in its first request.
    offered_checks: list[Callable[[list[str]], "str | None"]] = field(default_factory=list)
    # Files the scenario's server reads (rules, hooks), written into `directory` before the
    # agent starts (approval.py), and the flags added to the server's command for them.
    files: dict[str, str] = field(default_factory=dict)
    server_flags: list[str] = field(default_factory=list)
    directory: Path | None = None
    # Checks once the agent ended: (directory, the run's HOME, the uexec binary) -> problem.
    after: list[Callable[[Path, Path, str], "str | None"]] = field(default_factory=list)
    # A known gap in uexec, said in words: the scenario runs and its failures are shown as
    # XFAIL, not counted; should it pass, that fails the run (XPASS) until the mark goes.
    expected_failure: str | None = None
    # Seconds this scenario's agent run may take, when less than --timeout.
    timeout: float | None = None


# A person answering uexec's form in Claude Code 2.1.332 ("MCP server “uexec” requests your
# input" / the question / "❯ * answer: Type something…" / "Accept  Decline"): type, Enter
# moves to Accept, Enter accepts.
FORM_ANSWER = [
    ScreenStep(r"requests your input", "y", "the form asks: typed y", shows=r"✔ answer: y"),
    ScreenStep(r"✔ answer: y", "\r", "Enter: to Accept", shows=r"❯ Accept"),
    ScreenStep(r"❯ Accept", "\r", "Enter on Accept", gone=r"requests your input"),
]


SECRET = "s3cret-uexec-agents"
# The command compares a hash of what it read: the model, which writes the command, never
# knows the password itself.
SECRET_SHA256 = hashlib.sha256(SECRET.encode()).hexdigest()
PAGE_URL = re.compile(r"http://127\.0\.0\.1:\d+/p/[0-9a-f]+")


def fill_in_the_page(screen: str) -> str | None:
    """What the person does with the URL Claude Code shows: open it (GET, as a browser) and
    send the password in its form (POST, from the page's own origin)."""
    m = PAGE_URL.search(screen)
    if not m:
        return "no page URL on the screen"
    url = m.group(0)
    origin = url.split("/p/")[0]
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            if b'name="password"' not in resp.read():
                return "the page has no password field"
        req = urllib.request.Request(url, data=urllib.parse.urlencode({"password": SECRET}).encode(), method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": origin})
        with urllib.request.urlopen(req, timeout=10) as resp:
            if resp.status != 200:
                return f"the page answered {resp.status}"
    except OSError as exc:
        return f"the page: {exc}"
    return None


# Claude Code's dialog for a URL elicitation: "MCP server “uexec” wants to open a URL", the
# link, and "❯ Open in browser    I'm done, continue    Decline" (←/→ to switch).
PAGE_DONE = [
    ScreenStep(r"wants to open a URL", "\x1b[C", "the page filled in; → to 'I'm done, continue'",
               shows=r"❯ I.m done", action=fill_in_the_page),
    ScreenStep(r"❯ I.m done", "\r", "Enter on 'I'm done, continue'", gone=r"wants to open a URL"),
]


def all_scenarios(marker: str) -> list[Scenario]:
    unknown = 999999
    return [
        Scenario("long_poll", [
            Call("exec_command", {"cmd": "for i in 1 2 3; do echo tick $i; sleep 1; done", "yield_time_ms": 500}, "start ticks"),
            Call("write_stdin", {"session_id": SID, "chars": "", "yield_time_ms": 5000}, "poll to the end"),
        ], [
            [plain_text, session_stated, has_line("tick 1")],
            [plain_text, has_line("tick 2"), has_line("tick 3"), exit_stated(0)],
        ]),
        Scenario("repl_pty", [
            Call("exec_command", {"cmd": "python3 -q", "tty": True, "yield_time_ms": 1000}, "start python"),
            Call("write_stdin", {"session_id": SID, "chars": "print(6*7)\n", "yield_time_ms": 2000}, "print(6*7)"),
            Call("write_stdin", {"session_id": SID, "chars": "exit()\n", "yield_time_ms": 3000}, "exit()"),
        ], [
            [plain_text, session_stated],
            [plain_text, has_line("42")],
            [plain_text, exit_stated(0)],
        ]),
        Scenario("ctrl_c", [
            Call("exec_command", {"cmd": "sleep 100", "yield_time_ms": 300, "tty": True}, "sleep 100"),
            Call("write_stdin", {"session_id": SID, "chars": "\u0003", "yield_time_ms": 3000}, "Ctrl-C"),
        ], [
            [plain_text, session_stated],
            [plain_text, exit_stated()],
        ]),
        Scenario("unknown_session", [
            Call("write_stdin", {"session_id": unknown, "chars": ""}, f"poll {unknown}"),
        ], [
            [plain_text, unknown_session_error(unknown)],
        ]),
        Scenario("left_running", [
            Call("exec_command", {"cmd": f"export UEXEC_AGENTS_MARK={marker}; sleep 300; : {marker}", "yield_time_ms": 300},
                 "sleep 300, then the agent ends"),
        ], [
            [plain_text, session_stated],
        ], survivor_marker=marker),
        # The steps beyond the first ones: terminate, a pipe loop, Ctrl-C on pipes.
        Scenario("terminate", [
            Call("exec_command", {"cmd": f"export UEXEC_AGENTS_MARK={marker}-t; sleep 100; : {marker}-t",
                                  "yield_time_ms": 300}, "sleep 100"),
            Call("terminate_session", {"session_id": SID}, "terminate it"),
        ], [
            [plain_text, session_stated],
            [plain_text, terminated],
        ], survivor_marker=f"{marker}-t"),
        Scenario("pipe_loop", [
            Call("exec_command", {"cmd": "while read -r l; do echo \"got $l\"; done; echo loop-end", "stdin": "pipe",
                                  "yield_time_ms": 300}, "read loop on a pipe"),
            Call("write_stdin", {"session_id": SID, "chars": "one\ntwo\n", "yield_time_ms": 1000}, "two lines"),
            Call("write_stdin", {"session_id": SID, "chars": "", "eof": True, "yield_time_ms": 3000}, "end of input"),
        ], [
            [plain_text, session_stated],
            [plain_text, has_line("got one"), has_line("got two")],
            [plain_text, has_line("loop-end"), exit_stated(0)],
        ]),
        Scenario("ctrl_c_pipe", [
            Call("exec_command", {"cmd": "echo READY; exec sleep 100", "yield_time_ms": 500}, "sleep 100 on pipes"),
            Call("write_stdin", {"session_id": SID, "chars": "\u0003", "yield_time_ms": 3000}, "Ctrl-C"),
        ], [
            [plain_text, session_stated, has_line("READY")],
            [plain_text, exit_stated(130)],
        ]),
        # MCP Tasks, where a client takes them (interactive Claude Code): a `wait` on a
        # session still running becomes a background task, and the model's next turn brings
        # the notification of its end, with what it needs in words.
        Scenario("wait_task", [
            Call("exec_command", {"cmd": "echo started; sleep 3; echo finished", "yield_time_ms": 500}, "a 3 s run"),
            Call("wait", {"session_ids": [SID], "yield_time_ms": 500}, "wait on it"),
            Call(NOTIFICATION, {}, "the notification"),
        ], [
            [plain_text, session_stated, has_line("started")],
            [task_started],
            [task_notification, result_of_notification(plain_text), session_named, has_line("finished"),
             exit_stated(0), wall_time_at_least(2.5), transcript_named],
        ], agents=("claude-tty",)),
        # The explicit form: exec_command with background: true is a task from the start.
        Scenario("background_task", [
            Call("exec_command", {"cmd": "sleep 2; echo bg-done", "background": True, "yield_time_ms": 500},
                 "background: true"),
            Call(NOTIFICATION, {}, "the notification"),
        ], [
            [task_started],
            [task_notification, result_of_notification(plain_text), session_named, has_line("bg-done"),
             exit_stated(0)],
        ], agents=("claude-tty",)),
        # A question while a task watches: the person answers it in Claude Code's form.
        Scenario("form_prompt", [
            Call("exec_command", {"cmd": "printf 'Continue? [y/N] '; read -r a; echo \"answer=$a\"", "tty": True,
                                  "yield_time_ms": 500}, "a prompt on a PTY"),
            Call("wait", {"session_ids": [SID], "yield_time_ms": 500}, "wait on it"),
            Call(NOTIFICATION, {}, "the notification"),
        ], [
            [plain_text, session_stated, has_text("Continue? [y/N]")],
            [task_started],
            [task_notification, result_of_notification(plain_text), has_line("answer=y"), exit_stated(0)],
        ], agents=("claude-tty",), screen_steps=FORM_ANSWER),
        # The same question in a task asked for from the start (exec_command background: true).
        Scenario("form_prompt_bg", [
            Call("exec_command", {"cmd": "sleep 1; printf 'Continue? [y/N] '; read -r a; echo \"answer=$a\"", "tty": True,
                                  "background": True, "yield_time_ms": 500}, "a prompt, background: true"),
            Call(NOTIFICATION, {}, "the notification"),
        ], [
            [task_started],
            [task_notification, result_of_notification(plain_text), has_line("answer=y"), exit_stated(0)],
        ], agents=("claude-tty",), screen_steps=FORM_ANSWER),
        # A password prompt while a task watches: the one-time page, filled in by the person
        # with a real HTTP client; the command gets the password, the model never.
        Scenario("password_page", [
            Call("exec_command", {"cmd": "sleep 1; read -r -s -p 'Password: ' p; echo; "
                                         "h=$(printf %s \"$p\" | sha256sum); "
                                         f"[ \"${{h%% *}}\" = {SECRET_SHA256} ] && echo password-ok", "tty": True,
                                  "background": True, "yield_time_ms": 500}, "a password prompt, background: true"),
            Call(NOTIFICATION, {}, "the notification"),
        ], [
            [task_started],
            [task_notification, result_of_notification(plain_text), has_line("password-ok"), exit_stated(0)],
        ], agents=("claude-tty",), screen_steps=PAGE_DONE, secret=SECRET),
        # A task still waiting when Claude Code exits: nothing of it outlives the agent.
        Scenario("left_waiting", [
            Call("exec_command", {"cmd": f"export UEXEC_AGENTS_MARK={marker}-w; sleep 300; : {marker}-w",
                                  "yield_time_ms": 300}, "sleep 300"),
            Call("wait", {"session_ids": [SID], "yield_time_ms": 300}, "wait on it, then the agent ends"),
        ], [
            [plain_text, session_stated],
            [],
        ], survivor_marker=f"{marker}-w", agents=("claude-tty",)),
        # The README's recipe for uexec instead of Claude Code's own shell.
        Scenario("own_shell_off", [
            Call("exec_command", {"cmd": "echo uexec-not-bash"}, "echo"),
        ], [
            [plain_text, has_line("uexec-not-bash"), exit_stated(0)],
        ], agents=("claude", "claude-tty"), claude_tools=["--disallowedTools", "Bash"],
            offered_checks=[offers("mcp__uexec__exec_command"), offers_not("Bash")]),
    ]


def offers(name: str) -> Callable[[list[str]], "str | None"]:
    def check(offered: list[str]) -> str | None:
        return None if name in offered else f"{name} not offered (offered: {', '.join(offered)})"
    check.__name__ = f"offers {name}"
    return check


def offers_not(name: str) -> Callable[[list[str]], "str | None"]:
    def check(offered: list[str]) -> str | None:
        return f"{name} still offered" if name in offered else None
    check.__name__ = f"does not offer {name}"
    return check
