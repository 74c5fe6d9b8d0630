"""How each real agent is started against the mock model, with uexec as its MCP server.

Every run gets a fresh temporary HOME (and CODEX_HOME), a runtime directory of its own (so
a plain `uexec mcp` starts a daemon of the run's own there, which `stop_daemon` stops), an
environment built from nothing but PATH and what the agent needs, telemetry and update
checks off, and a hard timeout:
the agent is started in its own process group, and on timeout that group is sent SIGTERM,
then SIGKILL. The commands uexec starts live in sessions of their own (uexec puts them
there), so they are not in that group: whether they outlive the agent is what scenario
`left_running` checks, not something the group kill hides.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

DUMMY_KEY = "sk-uexec-agents-dummy"


@dataclass
class Run:
    """What one agent process did."""

    argv: list[str]
    pid: int = 0
    rc: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    tmp: str = ""
    notes: list[str] = field(default_factory=list)


def _base_env(home: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(home.parent / "run"),
        "USER": os.environ.get("USER", "root"),
        "SHELL": "/bin/bash",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": "dumb",
        # Anything that is not loopback goes to a closed port (when not in a network namespace).
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    return env


def _server_argv(server: str) -> list[str]:
    argv = shlex.split(server)
    if argv and not os.path.isabs(argv[0]) and os.sep in argv[0]:
        argv[0] = os.path.abspath(argv[0])
    return argv


def claude_command(binary: str, server: str, port: int, tmp: Path, prompt: str,
                   tools: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    argv = _server_argv(server)
    mcp = tmp / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"uexec": {"type": "stdio", "command": argv[0], "args": argv[1:]}}}))
    cmd = [binary, "-p", prompt,
           "--bare",                      # no hooks, plugins, CLAUDE.md, keychain: only what we pass
           "--mcp-config", str(mcp), "--strict-mcp-config",
           *(tools if tools is not None else
             ["--tools", ""]),            # no built-in tools: the model sees only uexec's
           "--allowedTools", "mcp__uexec",
           "--permission-mode", "dontAsk",  # anything not allowed above is denied, never asked
           "--output-format", "stream-json", "--verbose",
           "--no-session-persistence",
           "--model", "claude-sonnet-4-5"]
    env = _base_env(tmp / "home")
    env.update({
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        "MCP_TIMEOUT": "30000",
        "MCP_TOOL_TIMEOUT": "60000",
    })
    return cmd, env


def codex_command(binary: str, server: str, port: int, tmp: Path, prompt: str) -> tuple[list[str], dict[str, str]]:
    argv = _server_argv(server)
    codex_home = tmp / "codex_home"
    codex_home.mkdir()
    toml = "\n".join([
        'model = "gpt-5.5"',
        'model_provider = "mock"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
        "[features]",
        "enable_request_compression = false",
        "[analytics]",
        "enabled = false",
        "[feedback]",
        "enabled = false",
        "[otel]",
        'exporter = "none"',
        "[history]",
        'persistence = "none"',
        "[model_providers.mock]",
        'name = "mock"',
        f'base_url = "http://127.0.0.1:{port}/v1"',
        'wire_api = "responses"',
        'env_key = "UEXEC_AGENTS_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "supports_websockets = false",
        "[mcp_servers.uexec]",
        f"command = {json.dumps(argv[0])}",
        f"args = {json.dumps(argv[1:])}",
        "startup_timeout_sec = 30",
        "tool_timeout_sec = 60",
        # Codex hands an MCP server a few variables only (HOME, PATH...): the run's runtime
        # directory, where its uexec daemon goes, is passed on by name, as docs/src/mcp.md says.
        'env_vars = ["XDG_RUNTIME_DIR"]',
        "",
    ])
    (codex_home / "config.toml").write_text(toml)
    cmd = [binary, "exec", "--json", "--skip-git-repo-check", "--strict-config",
           "--dangerously-bypass-approvals-and-sandbox", "-C", str(tmp / "work"), prompt]
    env = _base_env(tmp / "home")
    env.update({"CODEX_HOME": str(codex_home), "UEXEC_AGENTS_KEY": DUMMY_KEY})
    return cmd, env


def run_agent(agent: str, binary: str, server: str, port: int, prompt: str, timeout_s: float,
              claude_tools: list[str] | None = None) -> Run:
    """Run the agent to its end or its timeout; its temporary directory is `Run.tmp`."""
    tmp = Path(tempfile.mkdtemp(prefix=f"uexec-agents-{agent}-"))
    (tmp / "home").mkdir()
    (tmp / "work").mkdir()
    (tmp / "run").mkdir(mode=0o700)
    if agent == "claude":
        cmd, env = claude_command(binary, server, port, tmp, prompt, claude_tools)
    else:
        cmd, env = codex_command(binary, server, port, tmp, prompt)
    run = Run(argv=cmd, tmp=str(tmp))
    out: list[bytes] = []
    err: list[bytes] = []
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tmp / "work", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    run.pid = proc.pid
    pumps = [threading.Thread(target=lambda s=s, b=b: b.extend(s), daemon=True)
             for s, b in ((proc.stdout, out), (proc.stderr, err))]
    for p in pumps:
        p.start()
    try:
        run.rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        run.timed_out = True
        run.rc = stop_group(proc)
    run.seconds = time.monotonic() - t0
    for p in pumps:
        p.join(timeout=5)
    run.stdout = b"".join(out).decode("utf-8", "replace")
    run.stderr = b"".join(err).decode("utf-8", "replace")
    return run


def stop_group(proc: subprocess.Popen) -> int:
    """SIGTERM the agent's process group, SIGKILL it after 5 s; the agent's exit code."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


def stop_daemon(server: str, tmp: str) -> bool:
    """Stops the uexec daemon a run's `uexec mcp` may have started in its runtime directory;
    whether one ran there."""
    uexec = _server_argv(server)[0]
    env = {**os.environ, "XDG_RUNTIME_DIR": str(Path(tmp) / "run")}
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
             "timeout": 30, "check": False, "env": env}
    ran = subprocess.run([uexec, "daemon", "--status"], **quiet).returncode == 0
    subprocess.run([uexec, "daemon", "--stop"], **quiet)
    return ran


def kill_leftover_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Interactive Claude Code: the program a person runs in a terminal (no -p), which declares
# MCP Tasks and form elicitation, defers MCP tools behind ToolSearch and backgrounds a task.

@dataclass
class ScreenStep:
    """What the person does when the screen shows `pattern` (a regex on what the terminal
    shows now): type `keys`. Ink draws a new state before its key handler follows it, so a
    key typed the moment the screen changed can be lost: the keys are typed again (three
    times at most) until the screen shows `shows`, or no longer shows `gone`."""

    pattern: str
    keys: str
    label: str = ""
    shows: str | None = None
    gone: str | None = None
    # Done first, with the screen's text: what the person does off the terminal (fill in a
    # page in a browser); a problem it returns ends the person's steps.
    action: Callable[[str], "str | None"] | None = None


@dataclass
class TtyRun(Run):
    """An interactive run: also what its screen showed, and what happened on the way."""

    transport: str = "stdio"
    screen: str = ""
    steps_done: list[str] = field(default_factory=list)
    screens: list[str] = field(default_factory=list)  # the screen at each person's step
    problems: list[str] = field(default_factory=list)
    exited_by_itself: bool = False
    # Over HTTP, the `uexec mcp --http` the harness started: stopped by the harness, after it
    # looked at what still ran in it once Claude Code had exited.
    http: subprocess.Popen | None = None


def seed_claude_home(home: Path, work: Path) -> None:
    """`~/.claude.json` as a person's after their first run (what the dialogs of a fresh
    HOME ask, read off the screen of 2.1.332): onboarding done (else: the welcome, then a
    connection check of api.anthropic.com), this working directory trusted (else: "Is this a
    project you created or one you trust?"), the API key of the environment approved by its
    last 20 characters (else: "Detected a custom API key in your environment", default No)."""
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [DUMMY_KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                                 "allowedTools": []}},
    }
    (home / ".claude.json").write_text(json.dumps(state, indent=2))


def start_http_server(server: str, env: dict[str, str], cwd: Path, timeout_s: float = 20.0
                      ) -> tuple[subprocess.Popen, str, list[bytes]]:
    """`server --http 127.0.0.1:0` in a process group of its own; its URL, read from the line
    it prints once it listens (`serving streamable HTTP at http://127.0.0.1:PORT/mcp`)."""
    argv = _server_argv(server) + ["--http", "127.0.0.1:0"]
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    out: list[bytes] = []
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            out.append(line)
            m = re.search(rb"(https?://127\.0\.0\.1:\d+/mcp)", line)
            if m and not url:
                url.append(m.group(1).decode())
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    found.wait(timeout_s)
    if not url:
        stop_group(proc)
        raise RuntimeError(f"{' '.join(argv)} did not say where it listens: {b''.join(out)[-500:]!r}")
    return proc, url[0], out


def claude_tty_command(binary: str, mcp_entry: dict, tmp: Path, port: int,
                       tools: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    mcp = tmp / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"uexec": mcp_entry}}))
    cmd = [binary,
           "--mcp-config", str(mcp), "--strict-mcp-config",
           *(tools or []),                # a person's default tool set, unless the scenario says
           "--allowedTools", "mcp__uexec",
           "--permission-mode", "dontAsk",  # anything not allowed above is denied, never asked
           "--model", "claude-sonnet-4-5",
           "--debug-file", str(tmp / "claude-debug.log")]  # where "MCP server ... connected" shows
    env = _base_env(tmp / "home")
    env.update({
        "TERM": "xterm-256color",
        "COLUMNS": "160", "LINES": "50",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        "MCP_TIMEOUT": "30000",
        "MCP_TOOL_TIMEOUT": "60000",
    })
    return cmd, env


def _wait_file(path: Path, patterns: list[str], deadline: float) -> str | None:
    """The first of `patterns` that the file shows before the deadline (a log another process
    writes: polled, as a file gives no other sign)."""
    while True:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            text = ""
        for p in patterns:
            if p in text:
                return p
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


# The footer under the prompt box: its mode line always, "esc to interrupt" while a turn runs
# (with a background task running it reads "⏵⏵ don't ask on · 1 MCP task · ↓ to manage").
IDLE_FOOTER = "⏵⏵"
EXIT_DIALOG = "Background work is running"  # /exit with a task running: "1. Exit and stop tasks"
FORM_TITLE = "requests your input"  # an MCP server's form elicitation, as Claude Code shows it
BUSY_FOOTER = "esc to interrupt"


def run_claude_tty(binary: str, server: str, transport: str, mock, prompt: str, timeout_s: float,
                   screen_steps: list[ScreenStep] | None = None, tools: list[str] | None = None) -> TtyRun:
    """Interactive Claude Code on a pseudo-terminal against the mock model: start it, wait
    until uexec is connected and the prompt box is idle, type the prompt, do the person's
    steps when the screen asks (a form), wait for the script's end, then /exit. Every wait is
    on something observable (the screen, Claude Code's debug log, the mock's requests), with
    the run's deadline."""
    from terminal import Terminal  # noqa: PLC0415 (POSIX only, as the rest)

    tmp = Path(tempfile.mkdtemp(prefix=f"uexec-agents-claude-tty-{transport}-"))
    home, work, rundir = tmp / "home", tmp / "work", tmp / "run"
    home.mkdir()
    work.mkdir()
    rundir.mkdir(mode=0o700)
    seed_claude_home(home, work)
    run = TtyRun(argv=[], tmp=str(tmp), transport=transport)
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    http = None
    if transport == "http":
        server_env = _base_env(home)
        try:
            http, url, _ = start_http_server(server, server_env, work)
        except RuntimeError as exc:
            run.problems.append(str(exc))
            return run
        entry = {"type": "http", "url": url}
    else:
        argv = _server_argv(server)
        entry = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    cmd, env = claude_tty_command(binary, entry, tmp, mock.port, tools)
    run.argv = cmd
    term = Terminal(cmd, env, str(work))
    run.pid = term.pid
    try:
        _drive(term, run, mock, prompt, screen_steps or [], tmp, deadline)
    finally:
        if term.proc.poll() is None:
            run.timed_out = run.timed_out or time.monotonic() > deadline
            run.rc = term.stop()
        else:
            run.rc = term.proc.returncode
        run.seconds = time.monotonic() - t0
        run.screen = term.screen_text()
        run.stdout = term.text()[-20000:]
        term.close()
        try:
            log = (tmp / "claude-debug.log").read_text(errors="replace")
        except OSError:
            log = ""
        # Its debug log's lines about MCP, tasks and elicitation, and its errors.
        run.stderr = "\n".join(ln for ln in log.splitlines()
                                if re.search(r"MCP|ERROR|[Tt]ask|[Ee]licit", ln))[-20000:]
        run.http = http
    return run


def _drive(term, run: TtyRun, mock, prompt: str, steps: list[ScreenStep], tmp: Path, deadline: float) -> None:
    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    got = _wait_file(tmp / "claude-debug.log",
                     ['MCP server "uexec": Successfully connected', 'MCP server "uexec" Connection failed'],
                     min(deadline, time.monotonic() + 40))
    if got is None or "failed" in got:
        run.problems.append("uexec did not connect" + (" (Connection failed)" if got else " in 40 s"))
        return
    run.steps_done.append("uexec connected")
    if not term.wait_screen(lambda s: IDLE_FOOTER in s and BUSY_FOOTER not in s, left()):
        run.problems.append("the prompt box never showed")
        return
    # Typed as a person types: the text, then Enter once the box shows it.
    at = term.mark()
    term.type(prompt)
    if not term.wait_for(re.escape(prompt[-20:]), min(10.0, left()), since=at):
        run.problems.append("the prompt did not show in the box")
        return
    term.type("\r")
    if not _until(lambda: len(mock.requests) > 0, min(30.0, left())):
        run.problems.append("no request reached the model after the prompt")
        return
    run.steps_done.append("prompt sent")
    person = threading.Thread(target=_person, args=(term, run, steps, deadline), daemon=True)
    person.start()
    if not mock.finished.wait(left()):
        run.timed_out = True
        run.problems.append("the script did not reach its end before the deadline")
        return
    person.join(timeout=left())

    def idle(s: str) -> bool:
        return IDLE_FOOTER in s and BUSY_FOOTER not in s

    # The last answer drawn and the box idle again (or a form no step expected, which the
    # person puts off with Esc): then /exit, as a person leaves.
    if not term.wait_screen(lambda s: idle(s) or FORM_TITLE in s, min(30.0, left())):
        run.problems.append("the box did not come back idle after the script's end")
    elif FORM_TITLE in term.screen_text():
        question = [ln.strip() for ln in term.screen_text().splitlines() if ln.strip()]
        at = next((i for i, ln in enumerate(question) if FORM_TITLE in ln), 0)
        run.problems.append("a form no step expected: " + " / ".join(question[at:at + 3]))
        run.screens.append(term.screen_text())
        term.type("\x1b")
        if not term.wait_screen(idle, min(10.0, left())):
            run.problems.append("the box did not come back idle after Esc on the form")
    at = term.mark()
    term.type("/exit")
    term.wait_for(r"/exit", min(5.0, left()), since=at)
    term.type("\r")
    # With a task still running Claude Code asks first: the person takes the default, "1. Exit
    # and stop tasks" (whether that stops the command is what left_waiting checks).
    if term.wait_screen(lambda s: EXIT_DIALOG in s, min(3.0, left())) and term.proc.poll() is None:
        run.screens.append(term.screen_text())
        run.steps_done.append("/exit asked about the running task: Enter on 'Exit and stop tasks'")
        term.type("\r")
    rc = term.wait(min(20.0, left()))
    if rc is None:
        run.problems.append("Claude Code did not exit on /exit within 20 s: " + term.screen_text()[-600:])
    else:
        run.exited_by_itself = True


def _person(term, run: TtyRun, steps: list[ScreenStep], deadline: float) -> None:
    for step in steps:
        rx = re.compile(step.pattern)
        if not term.wait_screen(lambda s, rx=rx: rx.search(s) is not None, max(0.0, deadline - time.monotonic())):
            run.problems.append(f"the screen never showed {step.pattern!r} ({step.label})")
            return
        run.screens.append(term.screen_text())
        if step.action is not None:
            problem = step.action(term.screen_text())
            if problem:
                run.problems.append(f"{step.label}: {problem}")
                return
        for attempt in range(3):
            term.type(step.keys)
            if step.shows is None and step.gone is None:
                break
            shows = re.compile(step.shows) if step.shows else None
            gone = re.compile(step.gone) if step.gone else None
            if term.wait_screen(lambda s: (shows is None or shows.search(s) is not None)
                                and (gone is None or gone.search(s) is None),
                                min(2.0, max(0.0, deadline - time.monotonic()))):
                break
        else:
            run.problems.append(f"{step.label}: the screen did not follow the keys {step.keys!r} (typed 3 times)")
            return
        run.steps_done.append(step.label + (f" (typed {attempt + 1} times)" if attempt else ""))


def _until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
