//! Wire types of the Codex exec-server dialect (JSON-RPC without the `jsonrpc` field).
