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
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

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
        # directory, where its uexec daemon goes, is passed on by name, as the README says.
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
