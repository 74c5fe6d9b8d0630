#!/usr/bin/env python3
"""Tokens the model receives per result, text form vs structured form, on real noisy output.

Claude Code and Codex show the model a result's `structuredContent` (as JSON) when it has
one, else its text. This runs three noisy commands for real through `uexec mcp` (text alone,
the default) and `uexec mcp --structured`, and counts the tokens of what each agent would
show: the text, or the JSON of structuredContent. Counted offline in o200k_base
(js-tiktoken) and Claude's tokenizer (@anthropic-ai/tokenizer), with the agent harness's
tokens.mjs (crates/uexec-mcp/agents; `npm ci` there first, Node 22 first in PATH).

  cargo build --release -p uexec && python3 bench/result_tokens.py --uexec target/release/uexec

Servers get an empty HOME (RUSTUP_HOME and CARGO_HOME kept) and commands `login: false`.
Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOKENS = HERE.parent / "crates" / "uexec-mcp" / "agents" / "tokens.mjs"


def make_workloads(root: Path):
    """Three noisy commands, made in `root`: a cargo build with errors (on a terminal:
    colours and progress), 300 verbose unittest cases with a progress bar, and npm
    installing a local package (on a terminal)."""
    crate = root / "broken"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "broken"\nversion = "0.1.0"\nedition = "2021"\n')
    (crate / "src" / "main.rs").write_text(
        "fn main() {\n"
        "    let x: u32 = \"seven\";\n"
        "    let v = vec![1, 2, 3];\n"
        "    let s: String = v.iter().sum();\n"
        "    println!(\"{}\", undefined_name + x);\n"
        "    let unused = 5;\n"
        "}\n")
    tests = root / "test_many.py"
    cases = "\n".join(
        f"    def test_case_{i:03}(self):\n        self.assertEqual({i} % 7 == 3, {i % 7 == 3})\n"
        for i in range(300))
    failing = "    def test_fails(self):\n        self.assertEqual([1, 2, 3], [1, 2, 4])\n"
    tests.write_text(
        "import sys, unittest\n"
        "class Many(unittest.TestCase):\n" + cases + failing +
        "if __name__ == '__main__':\n"
        "    for i in range(0, 101, 5):\n"
        "        sys.stderr.write(f'\\rcollecting {i:3d}% [' + '#' * (i // 5) + ' ' * (20 - i // 5) + ']')\n"
        "    sys.stderr.write('\\n')\n"
        "    unittest.main(verbosity=2)\n")
    pkg = root / "localpkg"
    pkg.mkdir()
    (pkg / "package.json").write_text(json.dumps({"name": "localpkg", "version": "1.0.0"}))
    (pkg / "index.js").write_text("module.exports = 42;\n")
    app = root / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0"}))
    return [
        ("cargo build, 4 errors (tty)", {"cmd": "cargo build --offline --color always", "workdir": str(crate), "tty": True}),
        ("unittest -v, 301 cases, a progress bar", {"cmd": f"python3 {tests}", "workdir": str(root)}),
        ("npm install of a local package (tty)", {"cmd": f"npm install --no-audit --no-fund --offline {pkg}", "workdir": str(app), "tty": True}),
    ]


class Mcp:
    """`uexec mcp ARGS` over stdio, JSON-RPC by hand."""

    def __init__(self, argv, home):
        real_home = Path.home()
        env = {
            **os.environ,
            "HOME": home,
            # The empty HOME keeps profiles out; the toolchain stays where it is.
            "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(real_home / ".rustup")),
            "CARGO_HOME": os.environ.get("CARGO_HOME", str(real_home / ".cargo")),
            "NPM_CONFIG_UPDATE_NOTIFIER": "false",
        }
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "result-tokens", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.p.stdin.write((json.dumps(message) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("uexec mcp closed its stdout")
            message = json.loads(line)
            if message.get("id") == self.next:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    def call(self, arguments):
        return self.request("tools/call", {"name": "exec_command", "arguments": arguments})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def shown(result):
    """What Claude Code and Codex show the model: the JSON of structuredContent when there
    is some, else the text."""
    if result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return "".join(c.get("text", "") for c in result.get("content", []))


def count(texts):
    out = subprocess.run(["node", str(TOKENS)], input=json.dumps(texts).encode(),
                         capture_output=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uexec", default="target/release/uexec")
    a = ap.parse_args()
    uexec = os.path.abspath(a.uexec)
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        home = root / "home"
        home.mkdir()
        workloads = make_workloads(root)
        forms = {"text (default)": [uexec, "mcp", "--in-process"], "--structured": [uexec, "mcp", "--in-process", "--structured"]}
        shown_texts = {}
        for form, argv in forms.items():
            server = Mcp(argv, str(home))
            for name, args in workloads:
                r = server.call({**args, "login": False, "yield_time_ms": 30000})
                shown_texts[(form, name)] = shown(r)
            server.close()
        keys = list(shown_texts)
        counts = dict(zip(keys, count([shown_texts[k] for k in keys])))
    print("| output | bytes shown, text | tokens, text (o200k / Claude) | bytes shown, --structured | tokens, --structured (o200k / Claude) | structured vs text (o200k) |")
    print("|---|---|---|---|---|---|")
    totals = {f: [0, 0] for f in forms}
    for name, _ in workloads:
        t, s = ("text (default)", name), ("--structured", name)
        for f, k in ((t[0], t), (s[0], s)):
            totals[f][0] += counts[k]["o200k"]
            totals[f][1] += counts[k]["claude"]
        print(f"| {name} | {len(shown_texts[t].encode())} | {counts[t]['o200k']} / {counts[t]['claude']} "
              f"| {len(shown_texts[s].encode())} | {counts[s]['o200k']} / {counts[s]['claude']} "
              f"| {counts[s]['o200k'] / max(counts[t]['o200k'], 1):.2f}x |")
    t, s = totals["text (default)"], totals["--structured"]
    print(f"| all | | {t[0]} / {t[1]} | | {s[0]} / {s[1]} | {s[0] / max(t[0], 1):.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
