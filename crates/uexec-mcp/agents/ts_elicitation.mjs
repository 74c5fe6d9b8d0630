#!/usr/bin/env node
// A person's yes or no to a held command, answered by a real MCP client: the TypeScript
// SDK's Client (@modelcontextprotocol/client 2.3.1, which the MCP Inspector brings) over its
// StdioClientTransport, declaring form elicitation, with `uexec mcp --rules` as its server
// (issue 39). Its `elicitation/create` handler answers as the person would and keeps what it
// was asked. Three cases, each in a fresh directory with its own HOME:
//
//   once    in-process; `touch made` held by a prompt rule; the person answers "run once":
//           the form names the command and the rule's justification and offers the three
//           answers; the result is no error; `made` exists; `uexec audit --json` has the
//           decision `prompt`, admitted, decided by the person.
//   deny    in-process; the person answers "deny" with a reason: the result is an error
//           that carries the reason; `made` does not exist; the audit row says refused.
//   daemon  the same "run once" through a plain `uexec mcp` (the daemon runs the command,
//           the question comes back through the front to the client).
//
//   node ts_elicitation.mjs --server "PATH/uexec mcp [FLAGS]" [--json] [--keep] [--negotiation auto]
//
// The client speaks the 2025 protocol (`initialize`, then the server's `elicitation/create`
// request), the SDK's default; `--negotiation auto` has it probe `server/discover` first and
// speak 2026-07-28 where the server answers it (not run by run.sh: see README.md).
//
// Prints one line per check (or, with --json, one JSON object: {cases: [{name, server,
// passed, failures, asked, result, is_error, seconds}]}); exit 0 only if every check passed.

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve, sep } from "node:path";

import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const RULES = `prefix_rule(
    pattern = ["touch"],
    decision = "prompt",
    justification = "it writes files",
)
`;
const ANSWERS = ["run once", "always (this prefix, this connection)", "deny"];
const REASON = "use the staging dir instead";
const CALL_TIMEOUT_MS = 30000;

function parseArgs(argv) {
  const out = { server: null, json: false, keep: false, negotiation: "legacy" };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--server") out.server = argv[++i];
    else if (argv[i] === "--json") out.json = true;
    else if (argv[i] === "--keep") out.keep = true;
    else if (argv[i] === "--negotiation") out.negotiation = argv[++i];
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!out.server) throw new Error('--server "PATH/uexec mcp ..." is required');
  return out;
}

function serverArgv(server) {
  const argv = server.split(/\s+/).filter(Boolean);
  if (!isAbsolute(argv[0]) && argv[0].includes(sep)) argv[0] = resolve(argv[0]);
  return argv;
}

function textOf(result) {
  return (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

/** One case: a client whose person answers `answer`, one exec_command of `touch made`. */
async function play(name, argv, answer, checks, negotiation) {
  const t0 = Date.now();
  const dir = mkdtempSync(join(tmpdir(), `uexec-ts-elicitation-${name}-`));
  const home = join(dir, "home");
  const run = join(dir, "run");
  mkdirSync(home);
  mkdirSync(run, { mode: 0o700 });
  writeFileSync(join(dir, "team.rules"), RULES);
  const env = { PATH: process.env.PATH || "/usr/bin:/bin", HOME: home, XDG_RUNTIME_DIR: run, LANG: "C.UTF-8" };
  const c = { name, server: argv.join(" "), passed: [], failures: [], asked: [], result: null, is_error: null };
  const check = (label, ok, why) => (ok ? c.passed.push(label) : c.failures.push(`${label}: ${why}`));

  const client = new Client({ name: "uexec-ts-elicitation", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: negotiation } });
  client.setRequestHandler("elicitation/create", async (request) => {
    c.asked.push(request.params);
    return { action: "accept", content: answer };
  });
  const transport = new StdioClientTransport({
    command: argv[0],
    args: [...argv.slice(1), "--rules", join(dir, "team.rules")],
    env,
    cwd: dir,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (d) => { stderr += d; });
  try {
    await client.connect(transport);
    const result = await client.callTool({ name: "exec_command", arguments: { cmd: "touch made", login: false } },
      { timeout: CALL_TIMEOUT_MS });
    c.result = textOf(result);
    c.is_error = result.isError === true;
  } catch (e) {
    c.failures.push(`the call failed: ${e?.message || e}; server stderr: ${stderr.slice(-400)}`);
  } finally {
    await client.close().catch(() => {});
  }
  if (c.result !== null) checks(c, dir, check);
  // What the person decided is in the record `uexec audit` reads, under the server's HOME.
  if (c.result !== null) {
    let rows = [];
    try {
      const out = execFileSync(argv[0], ["audit", "--json"], {
        env: { PATH: env.PATH, HOME: home }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"],
      });
      rows = out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
    } catch (e) {
      c.failures.push(`uexec audit --json: ${String(e?.stderr || e?.message || e).trim().split("\n")[0]}`);
    }
    const touch = rows.filter((r) => r.command === "touch made");
    const want = answer.answer === "deny" ? "refused" : "admitted";
    check(`audit: prompt, ${want}, by the person`,
      touch.length === 1 && touch[0].decision === "prompt" && touch[0].outcome === want && /person/.test(touch[0].by),
      `rows: ${JSON.stringify(rows)}`);
  }
  if (argv.includes("--in-process") === false) {
    // The daemon this plain `uexec mcp` started in the case's runtime directory.
    try {
      execFileSync(argv[0], ["daemon", "--stop"], { env: { ...env }, stdio: "ignore", timeout: 30000 });
    } catch { /* none ran: the checks say so */ }
  }
  c.seconds = (Date.now() - t0) / 1000;
  c.dir = dir;
  return c;
}

function askedChecks(c, check) {
  check("asked once", c.asked.length === 1, `asked ${c.asked.length} times`);
  const q = c.asked[0] || {};
  const message = q.message || "";
  check("the form names the command", message.includes("touch made"), JSON.stringify(message));
  check("the form names the justification", message.includes("it writes files"), JSON.stringify(message));
  const offered = q.requestedSchema?.properties?.answer;
  const values = offered?.enum || (offered?.oneOf || []).map((o) => o.const);
  check("the form offers the three answers", ANSWERS.every((a) => values.includes(a)),
    JSON.stringify(q.requestedSchema));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const base = serverArgv(args.server);
  const inProcess = base.includes("--in-process") ? base : [...base, "--in-process"];
  const cases = [];
  cases.push(await play("once", inProcess, { answer: "run once" }, (c, dir, check) => {
    askedChecks(c, check);
    check("not an error", !c.is_error, c.result);
    check("made exists", existsSync(join(dir, "made")), "the command did not run");
  }, args.negotiation));
  cases.push(await play("deny", inProcess, { answer: "deny", reason: REASON }, (c, dir, check) => {
    askedChecks(c, check);
    check("an error", c.is_error, c.result);
    check("the error carries the reason", c.result.includes(REASON), c.result);
    check("made does not exist", !existsSync(join(dir, "made")), "the command ran");
  }, args.negotiation));
  if (!base.includes("--in-process") && !base.includes("--http")) {
    cases.push(await play("daemon", base, { answer: "run once" }, (c, dir, check) => {
      askedChecks(c, check);
      check("not an error", !c.is_error, c.result);
      check("made exists", existsSync(join(dir, "made")), "the command did not run");
    }, args.negotiation));
  }
  for (const c of cases) if (!args.keep) rmSync(c.dir, { recursive: true, force: true });
  if (args.json) {
    process.stdout.write(JSON.stringify({ cases }) + "\n");
  } else {
    for (const c of cases) {
      for (const p of c.passed) console.log(`PASS ${c.name}: ${p}`);
      for (const f of c.failures) console.log(`FAIL ${c.name}: ${f}`);
    }
  }
  process.exit(cases.every((c) => c.failures.length === 0) ? 0 : 1);
}

main().catch((e) => {
  console.error(e?.stack || String(e));
  process.exit(2);
});
