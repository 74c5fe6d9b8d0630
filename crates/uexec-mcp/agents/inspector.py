"""The MCP Inspector CLI (`mcp-inspector --cli`, 2.12.0) on uexec mcp: a long `exec_command`,
a poll with `write_stdin`, a `terminate_session`, each one invocation of the CLI as a person
types them, and what it prints checked as the other agents' results are.

The CLI connects, makes one call and exits. Over HTTP it talks to one `uexec mcp --http`
the harness started; over stdio every invocation starts its own `uexec mcp`, which keeps its
sessions in the daemon, so the server command gets `--linger 60` to let the session outlive
the invocation that started it (with the default 0 the daemon ends it as its client goes).
There is no model here: the session id of the poll is read from what the CLI printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from agents import Run, _base_env, _server_argv, start_http_server, stop_group
from mock_model import Call, Record
from scenarios import has_line, plain_text, session_stated, terminated

LINGER = ["--linger", "60"]


def steps(marker: str) -> list[tuple[Call, list]]:
    return [
        (Call("exec_command", {"cmd": f"export UEXEC_AGENTS_MARK={marker}; for i in $(seq 1 60); do echo tick $i; "
                                      f"sleep 1; done; : {marker}", "yield_time_ms": 1500}, "a 60 s loop"),
         [plain_text, session_stated, has_line("tick 1")]),
        (Call("write_stdin", {"session_id": "$sid", "chars": "", "yield_time_ms": 5000}, "poll"),
         [plain_text, session_stated, has_line("tick 3")]),
        (Call("terminate_session", {"session_id": "$sid"}, "terminate"),
         [plain_text, terminated]),
    ]


def printed_text(stdout: str) -> tuple[str, bool | None]:
    """The result's text as the CLI printed it (its JSON's `content` texts), else what it
    printed (a task has no content: the CLI prints the task itself)."""
    try:
        result = json.loads(stdout)
    except ValueError:
        return stdout, None
    texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]
    if texts:
        return "\n".join(texts), result.get("isError")
    return stdout, result.get("isError")


def run_inspector(binary: str, server: str, transport: str, marker: str, timeout_s: float
                  ) -> tuple[list[tuple[Record, list]], Run, subprocess.Popen | None]:
    tmp = Path(tempfile.mkdtemp(prefix=f"uexec-agents-inspector-{transport}-"))
    home, work, rundir = tmp / "home", tmp / "work", tmp / "run"
    home.mkdir()
    work.mkdir()
    rundir.mkdir(mode=0o700)
    env = _base_env(home)
    env["MCP_INSPECTOR_SECRET_STORE"] = "memory"  # no keychain here, and nothing to keep
    run = Run(argv=[binary, "--cli"], tmp=str(tmp))
    http = None
    if transport == "http":
        http, url, _ = start_http_server(server, env, work)
        target = ["--server-url", url, "--transport", "http"]
    else:
        argv = _server_argv(server) + LINGER
        (tmp / "servers.json").write_text(json.dumps(
            {"mcpServers": {"uexec": {"command": argv[0], "args": argv[1:],
                                      "env": {"XDG_RUNTIME_DIR": env["XDG_RUNTIME_DIR"]}}}}))
        target = ["--config", str(tmp / "servers.json"), "--server", "uexec"]
    done: list[tuple[Record, list]] = []
    sid = None
    t0 = time.monotonic()
    for call, checks in steps(marker):
        args = {k: (sid if v == "$sid" else v) for k, v in call.arguments.items()}
        rec = Record(call=call, sent_name=call.tool, sent_arguments=args)
        done.append((rec, checks))
        if "$sid" in call.arguments.values() and sid is None:
            run.notes.append(f"{call.label}: no session id printed before it")
            break
        cmd = [binary, "--cli", *target, "--method", "tools/call", "--tool-name", call.tool,
               "--tool-args-json", json.dumps(args)]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout_s, start_new_session=True)
        except subprocess.TimeoutExpired:
            run.timed_out = True
            break
        rec.text, rec.is_error = printed_text(proc.stdout.strip())
        rec.raw = proc.stdout
        run.stdout += proc.stdout
        run.stderr += proc.stderr
        if proc.returncode != 0:
            run.notes.append(f"{call.label}: exit code {proc.returncode}")
        sid = rec.session_id() or sid
    run.seconds = time.monotonic() - t0
    run.rc = 0 if not run.notes and not run.timed_out else 1
    return done, run, http


def stop_inspector_servers(server: str, run: Run, http: subprocess.Popen | None) -> None:
    if http is not None:
        stop_group(http)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(Path(run.tmp) / "run")}
    subprocess.run([_server_argv(server)[0], "daemon", "--stop"], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
