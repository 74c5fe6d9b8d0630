"""A scripted model on 127.0.0.1 that the real agents talk to instead of a provider.

Two dialects of one script: the Anthropic Messages API (Claude Code, `POST /v1/messages`
with `stream: true`) and the OpenAI Responses API (Codex, `POST /v1/responses`), both
answered as server-sent events. Why a script and not a fake agent: what we test is what the
agent does with uexec's results on their way back to the model, so the agent must be the
real one and only the model may be scripted.

Flow of one agent run:

1. The harness hands `MockModel` a list of `Call`s (uexec tool name and arguments) and
   starts it on an ephemeral loopback port.
2. Every POST body is recorded whole. A request that does not offer the uexec tools (a
   title or quota probe) is answered with a short text and changes nothing.
3. A conversation request first yields, from its messages, what the agent handed back for
   the call the previous answer made (Anthropic `tool_result`, Responses
   `function_call_output`): that is the record the harness asserts on.
4. Then it is answered with the next call, or with a final text once the script is done.
   Argument values `"$sid"` become the session id read from the latest result, so a poll
   follows the command it polls.
5. Codex defers MCP tools behind `tool_search`, interactive Claude Code behind `ToolSearch`:
   while a uexec tool is not yet offered directly, the answer is a search first (Codex's
   `tool_search_call`, Claude Code's `ToolSearch` with `select:mcp__uexec__NAME`), and the
   call follows its output.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SID = "$sid"
# A script step that is no call: the model ends its turn and the step's record is what the
# agent brings in its next request by itself (interactive Claude Code's task notification).
NOTIFICATION = "(notification)"
WAITING_TEXT = "Waiting for the task to end."
# Claude Code's reminder of the tokens left, in every turn: no news.
TOKENS_LEFT = re.compile(r"\s*<system-reminder>\s*<total_tokens>[^<]*</total_tokens>\s*</system-reminder>\s*$")
# What an agent may show for a session id: the text layout, or a JSON object.
SESSION_ID_PATTERNS = (re.compile(r"session ID (\d+)"), re.compile(r'"session_id"\s*:\s*(\d+)'))


@dataclass
class Call:
    """One tool call the scripted model makes, and what the harness expects back."""

    tool: str
    arguments: dict[str, Any]
    label: str
    expect: dict[str, Any] = field(default_factory=dict)


@dataclass
class Record:
    """One call as it happened: what was sent, and what the agent handed back."""

    call: Call
    sent_name: str = ""
    sent_arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    t_sent: float = 0.0
    t_back: float | None = None
    text: str | None = None
    is_error: bool | None = None
    raw: Any = None

    def session_id(self) -> int | None:
        for pattern in SESSION_ID_PATTERNS:
            m = pattern.search(self.text or "")
            if m:
                return int(m.group(1))
        return None


def sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class Anthropic:
    """Claude Code's side: Messages API requests and streamed answers."""

    name = "anthropic"
    # Interactive Claude Code defers MCP tools behind ToolSearch (`claude -p --bare` does not).
    search_tool = "ToolSearch"

    @staticmethod
    def search_arguments(tool: str) -> dict[str, Any]:
        return {"query": f"select:mcp__uexec__{tool}", "max_results": 5}

    @staticmethod
    def offered(body: dict[str, Any]) -> list[str]:
        return [t.get("name", "") for t in body.get("tools") or []]

    @staticmethod
    def tool_name(offered: list[str], tool: str) -> str | None:
        for name in offered:
            if name.startswith("mcp__uexec") and name.endswith("__" + tool):
                return name
        return None

    @staticmethod
    def returned(body: dict[str, Any]) -> dict[str, tuple[str, bool | None, Any]]:
        found = {}
        for msg in body.get("messages") or []:
            if msg.get("role") != "user" or not isinstance(msg.get("content"), list):
                continue
            for part in msg["content"]:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    content = part.get("content")
                    if isinstance(content, list):
                        text = "".join(c.get("text", "") for c in content if c.get("type") == "text")
                    else:
                        text = content if isinstance(content, str) else json.dumps(content)
                    found[part.get("tool_use_id")] = (text, part.get("is_error"), part)
        return found

    @staticmethod
    def user_texts(body: dict[str, Any]) -> list[str]:
        """The text parts of the user side of the conversation (tool results left out). Claude
        Code merges and reorders a conversation's parts, so what a request brings anew is
        found by what the previous one did not carry."""
        texts = []
        for msg in body.get("messages") or []:
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            texts += [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
                      and not TOKENS_LEFT.match(p.get("text", ""))]
        return texts

    @staticmethod
    def answer(body: dict[str, Any], text: str, tool: tuple[str, str, dict[str, Any]] | None) -> tuple[bytes, str]:
        model = body.get("model", "mock")
        usage = {"input_tokens": 1, "output_tokens": 1}
        blocks: list[tuple[str, dict[str, Any]]] = []
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        blocks += [
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        if tool:
            call_id, name, args = tool
            js = json.dumps(args)
            half = len(js) // 2  # two deltas: the agent must join partial JSON
            content.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
            blocks.append(("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}))
            for piece in (js[:half], js[half:]):
                blocks.append(("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}}))
            blocks.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
        stop = "tool_use" if tool else "end_turn"
        if not body.get("stream"):
            msg = {"id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": content,
                   "stop_reason": stop, "stop_sequence": None, "usage": usage}
            return json.dumps(msg).encode(), "application/json"
        start = {"type": "message_start", "message": {"id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                                                       "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
        events = [("message_start", start), *blocks,
                  ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}}),
                  ("message_stop", {"type": "message_stop"})]
        return sse(events), "text/event-stream"


def _qualified(namespace: dict[str, Any], tool: dict[str, Any]) -> str:
    """`mcp__uexec` + `exec_command` as one name, split again when the call is made."""
    return f"{namespace.get('name', '').rstrip('_')}__{tool.get('name')}"


class Responses:
    """Codex's side: Responses API requests and streamed answers."""

    name = "responses"
    search_tool = "tool_search"

    @staticmethod
    def search_arguments(tool: str) -> dict[str, Any]:
        return {"query": f"uexec {tool}", "limit": 8}

    @staticmethod
    def offered(body: dict[str, Any]) -> list[str]:
        names = []
        for tool in body.get("tools") or []:
            if tool.get("type") == "namespace":
                names += [_qualified(tool, t) for t in tool.get("tools") or []]
            else:
                names.append(tool.get("name") or tool.get("type", ""))
        # Tools a tool_search exposed arrive in its output, inside the input.
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "tool_search_output":
                for tool in item.get("tools") or []:
                    if tool.get("type") == "namespace":
                        names += [_qualified(tool, t) for t in tool.get("tools") or []]
                    elif tool.get("name"):
                        names.append(tool["name"])
        return names

    @staticmethod
    def tool_name(offered: list[str], tool: str) -> str | None:
        for name in offered:
            if name.startswith("mcp__uexec") and name.endswith("__" + tool):
                return name
        return None

    @staticmethod
    def returned(body: dict[str, Any]) -> dict[str, tuple[str, bool | None, Any]]:
        found = {}
        for item in body.get("input") or []:
            if not isinstance(item, dict) or item.get("type") not in ("function_call_output", "tool_search_output"):
                continue
            out = item.get("output")
            if isinstance(out, list):
                text = "".join(p.get("text", "") for p in out if isinstance(p, dict))
            elif isinstance(out, str):
                text = out
            else:
                text = json.dumps(item.get("tools", out))
            found[item.get("call_id")] = (text, None, item)
        return found

    @staticmethod
    def user_texts(body: dict[str, Any]) -> list[str]:
        return []  # Codex brings nothing by itself: no step waits for it there

    @staticmethod
    def answer(body: dict[str, Any], text: str, tool: tuple[str, str, dict[str, Any]] | None) -> tuple[bytes, str]:
        rid = f"resp-{time.monotonic_ns()}"
        if tool is None:
            item = {"type": "message", "role": "assistant", "id": f"msg-{rid}", "content": [{"type": "output_text", "text": text}]}
        elif tool[1] == "tool_search":
            item = {"type": "tool_search_call", "call_id": tool[0], "execution": "client", "status": "completed", "arguments": tool[2]}
        else:
            call_id, qualified, args = tool
            # A namespaced tool is called by its namespace and its own name.
            namespace, _, short = qualified.rpartition("__")
            item = {"type": "function_call", "call_id": call_id, "namespace": namespace, "name": short,
                    "arguments": json.dumps(args)}
        usage = {"input_tokens": 0, "input_tokens_details": None, "output_tokens": 0, "output_tokens_details": None, "total_tokens": 0}
        return sse([("response.created", {"type": "response.created", "response": {"id": rid}}),
                    ("response.output_item.done", {"type": "response.output_item.done", "item": item}),
                    ("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}})]), "text/event-stream"


class MockModel:
    """The script, its records, and the HTTP server that plays it."""

    def __init__(self, dialect: Any, calls: list[Call], final_text: str = "done"):
        self.dialect = dialect
        self.calls = calls
        self.final_text = final_text
        self.records: list[Record] = []
        self.searches: list[Record] = []
        self.requests: list[dict[str, Any]] = []
        self.other: list[str] = []
        self.errors: list[str] = []
        self.finished = threading.Event()
        self.lock = threading.Lock()
        self.pending: Record | None = None
        self.aborted = False
        self.seq = 0
        self.t0 = time.monotonic()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                model.other.append(f"GET {self.path}")
                if self.path.split("?")[0].endswith("/models"):
                    self._reply(200, b'{"object":"list","data":[],"models":[]}', "application/json")
                else:
                    self._reply(404, b'{"error":{"message":"not found"}}', "application/json")

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    self._reply(200, b'{"input_tokens":1}', "application/json")
                    return
                if not path.endswith(("/messages", "/responses")):
                    model.other.append(f"POST {self.path}")
                    self._reply(404, b'{"error":{"message":"not found"}}', "application/json")
                    return
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    model.errors.append(f"undecodable request body: {exc}")
                    self._reply(400, b'{"error":{"message":"bad json"}}', "application/json")
                    return
                payload, ctype = model.turn(body)
                self._reply(200, payload, ctype)

        return Handler

    def start(self) -> "MockModel":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _resolve(self, value: Any) -> Any:
        if value == SID:
            for rec in reversed(self.records):
                sid = rec.session_id()
                if sid is not None:
                    return sid
            raise LookupError("no earlier result carried a session id")
        if isinstance(value, dict):
            return {k: self._resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve(v) for v in value]
        return value

    def turn(self, body: dict[str, Any]) -> tuple[bytes, str]:
        d = self.dialect
        with self.lock:
            self.requests.append(body)
            offered = d.offered(body)
            if not any(d.tool_name(offered, c.tool) for c in self.calls) and d.search_tool not in offered:
                return d.answer(body, "ok", None)
            if self.pending is not None and self.pending.call.tool == NOTIFICATION:
                seen = list(self.pending.raw or [])
                new = []
                for text in d.user_texts(body):
                    if text in seen:
                        seen.remove(text)
                    elif text.strip():
                        new.append(text)
                if not new:
                    # Nothing new from the agent's side: not the turn a notification starts.
                    return d.answer(body, "ok", None)
                self.pending.text, self.pending.t_back = "\n".join(new), self.now()
                self.pending = None
            elif self.pending is not None:
                got = d.returned(body).get(self.pending.call_id)
                if got is None:
                    self.errors.append(f"request {len(self.requests)}: nothing handed back for {self.pending.call_id}")
                else:
                    self.pending.text, self.pending.is_error, self.pending.raw = got
                    self.pending.t_back = self.now()
                self.pending = None
            done = len(self.records)
            if done >= len(self.calls) or self.aborted:
                self.finished.set()
                return d.answer(body, self.final_text, None)
            call = self.calls[done]
            self.seq += 1
            call_id = f"call_{self.seq}"
            if call.tool == NOTIFICATION:
                # What the agent's side said so far (`raw`): the notification is what comes anew.
                rec = Record(call=call, sent_name=NOTIFICATION, call_id=call_id, t_sent=self.now(),
                             raw=d.user_texts(body))
                self.records.append(rec)
                self.pending = rec
                return d.answer(body, WAITING_TEXT, None)
            name = d.tool_name(offered, call.tool)
            if name is None:
                # Deferred behind a tool search (Codex, interactive Claude Code): search first,
                # call after.
                rec = Record(call=Call(d.search_tool, {}, f"search for {call.tool}"), sent_name=d.search_tool,
                             sent_arguments=d.search_arguments(call.tool), call_id=call_id, t_sent=self.now())
                if len(self.searches) > len(self.calls):
                    self.errors.append(f"{call.tool} still not offered after {len(self.searches)} searches")
                    self.aborted = True
                    self.finished.set()
                    return d.answer(body, "scenario aborted: tool not found", None)
                self.searches.append(rec)
                self.pending = rec
                return d.answer(body, "", (call_id, d.search_tool, rec.sent_arguments))
            try:
                args = self._resolve(call.arguments)
            except LookupError as exc:
                self.errors.append(f"{call.label}: {exc}")
                self.aborted = True
                self.finished.set()
                return d.answer(body, f"scenario aborted: {exc}", None)
            rec = Record(call=call, sent_name=name, sent_arguments=args, call_id=call_id, t_sent=self.now())
            self.records.append(rec)
            self.pending = rec
            return d.answer(body, f"Calling {call.tool}.", (call_id, name, args))
