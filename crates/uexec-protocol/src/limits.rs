//! Size limits of the wire, shared by both ends: the server (`uexec serve`) refuses what is
//! larger, and the client (`uexec-client`) reads the server's messages with the same limits.
//! Both are tungstenite's defaults, as in Codex.

/// Largest incoming message (a WebSocket message, a stdio line).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Largest incoming WebSocket frame (a message may span frames).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
