//! Method names of the dialect. A server looks the name up *before* anything else, so an
//! unknown method is `-32601` even before `initialize`.

/// Every method and notification a server of this dialect knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Request: open or resume a session.
    Initialize,
    /// Notification from the client: the handshake is complete.
    Initialized,
    /// Request: describe the server's environment.
    EnvironmentInfo,
    ProcessStart,
    ProcessRead,
    ProcessWrite,
    ProcessSignal,
    ProcessTerminate,
    /// Notification from the server: a chunk of output.
    ProcessOutput,
    /// Notification from the server: the process exited.
    ProcessExited,
    /// Notification from the server: output closed and exit known; the last event.
    ProcessClosed,
}

impl Method {
    pub const ALL: [Method; 11] = [
        Self::Initialize,
        Self::Initialized,
        Self::EnvironmentInfo,
        Self::ProcessStart,
        Self::ProcessRead,
        Self::ProcessWrite,
        Self::ProcessSignal,
        Self::ProcessTerminate,
        Self::ProcessOutput,
        Self::ProcessExited,
        Self::ProcessClosed,
    ];

    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Initialize => "initialize",
            Self::Initialized => "initialized",
            Self::EnvironmentInfo => "environment/info",
            Self::ProcessStart => "process/start",
            Self::ProcessRead => "process/read",
            Self::ProcessWrite => "process/write",
            Self::ProcessSignal => "process/signal",
            Self::ProcessTerminate => "process/terminate",
            Self::ProcessOutput => "process/output",
            Self::ProcessExited => "process/exited",
            Self::ProcessClosed => "process/closed",
        }
    }

    /// Looks a wire name up.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.as_str()), Some(m));
        }
        assert_eq!(Method::from_name("process/teleport"), None);
    }
}
