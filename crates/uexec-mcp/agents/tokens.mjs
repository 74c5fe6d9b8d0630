// Token counts of texts, offline: o200k_base (OpenAI's models, what Codex talks to) from
// js-tiktoken, whose ranks ship inside the package, and Claude's tokenizer from
// @anthropic-ai/tokenizer. Reads a JSON array of strings on stdin, writes a JSON array of
// {o200k, claude} in the same order.
import { createRequire } from "node:module";
import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";

const require = createRequire(import.meta.url);
const { countTokens } = require("@anthropic-ai/tokenizer");

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const texts = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const enc = new Tiktoken(o200k);
const counts = texts.map((t) => ({ o200k: enc.encode(t).length, claude: countTokens(t) }));
process.stdout.write(JSON.stringify(counts) + "\n");
