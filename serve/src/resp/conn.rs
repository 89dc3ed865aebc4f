//! One RESP connection's state ([`Conn`]) and what a command did to it ([`Outcome`]): what the
//! dispatch (`commands.rs`), the secret's gate (`auth.rs`) and the read loop (`mod.rs`) share.

use super::multi::Queue;
use crate::auth::Secret;
use std::sync::Arc;

/// One connection's state.
#[derive(Debug, Default)]
pub(crate) struct Conn {
    pub(crate) id: u64,
    pub(crate) name: Option<Vec<u8>>,
    /// The connection asked for RESP3 (`HELLO 3`).
    pub(crate) resp3: bool,
    /// Commands queued since `MULTI`, run by `EXEC`.
    pub(crate) queued: Option<Queue>,
    /// The service's secret, if it asks for one (`--auth-file`).
    pub(crate) secret: Option<Arc<Secret>>,
    /// The connection presented the secret (see `auth`).
    pub(crate) authenticated: bool,
}

impl Conn {
    /// Whether the connection may run any command: it presented the secret, or none is asked.
    pub(crate) fn authenticated(&self) -> bool {
        self.authenticated || self.secret.is_none()
    }
}

/// What a command did to the connection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The reply is an error.
    pub(crate) error: bool,
    /// Close the connection once the reply is written (`QUIT`).
    pub(crate) close: bool,
}
