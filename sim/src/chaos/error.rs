//! Why a real run could not start or finish: the chaos mode's one error
//! type, in a file of its own so that every part of the mode can use it
//! without importing its parent.

/// Why a real run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// A fault real processes cannot be given.
    #[error(
        "{file}:{line}:{column}: fault `{kind}` on {target} cannot run on real processes: {why}"
    )]
    Refused {
        /// The scenario file.
        file: String,
        /// Where the fault is written.
        line: usize,
        /// Its column.
        column: usize,
        /// The fault kind.
        kind: &'static str,
        /// Its target.
        target: String,
        /// Why.
        why: &'static str,
    },
    /// A scenario's `[server] flavour` has no binary to run it.
    #[error(
        "{file}:{line}:{column}: [server] flavour `{flavour}` cannot run on real processes: {why}"
    )]
    NoServer {
        /// The scenario file.
        file: String,
        /// Where the flavour is written.
        line: usize,
        /// Its column.
        column: usize,
        /// The flavour's name.
        flavour: &'static str,
        /// Why, and how to get one.
        why: String,
    },
    /// A started process is not the server its flavour wants.
    #[error("{what} answers as {found}, but the run started it as {expected}")]
    WrongServer {
        /// Which process.
        what: String,
        /// The server its binary said it is.
        expected: String,
        /// What its `INFO server` says.
        found: String,
    },
    /// No server binary to run (the message says how to get one).
    #[error(transparent)]
    MissingBinary(#[from] servers::FindError),
    /// A port the run was told to use is taken.
    #[error("port {port} is already in use: {source}")]
    PortTaken {
        /// The port.
        port: u16,
        /// What binding it said.
        source: std::io::Error,
    },
    /// The ports from a base ran past 65535.
    #[error("no ports left above --base-port {base}")]
    PortsExhausted {
        /// The base.
        base: u16,
    },
    /// A process did not come up.
    #[error("{what} did not start: {why}")]
    Start {
        /// What.
        what: String,
        /// What it said.
        why: String,
    },
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A bad `--target` URL.
    #[error("bad --target {0:?}: write redis://HOST:PORT")]
    BadTarget(String),
    /// The run was interrupted (Ctrl-C); everything it started is gone.
    #[error("interrupted; every process the run started was stopped")]
    Interrupted,
    /// A harness bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<servers::PortError> for ChaosError {
    fn from(error: servers::PortError) -> Self {
        match error {
            servers::PortError::Taken { port, source } => Self::PortTaken { port, source },
            servers::PortError::Exhausted { base } => Self::PortsExhausted { base },
            other => Self::Io {
                what: other.to_string(),
                source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
            },
        }
    }
}
