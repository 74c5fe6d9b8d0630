//! The MCP face of uexec.
