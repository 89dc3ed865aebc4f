//! What every listener shares, whatever its protocol: connections come through a [`Gate`]
//! (a cap on connections open at once, fitted below the open-files limit by [`fd`], and a
//! back-off when accepting fails), live under [`Deadlines`] (a header timeout and an idle
//! timeout), and, for gRPC and HTTP, may be behind TLS ([`tls`]).
//!
//! * `fd`: the open-files limit, and the caps fitted below it;
//! * `gate`: the accept loop, the cap, the back-off;
//! * `watched`: deadlines on a connection's reads and writes (gRPC, HTTP);
//! * `stream`: a connection, plain or TLS;
//! * `tls`: the certificates;
//! * `incoming`: gate, TLS handshake and deadlines together, as hyper and tonic take them;
//! * `settings`: the flags' values, and [`Config`](crate::Config)'s methods that set them.

mod fd;
mod gate;
mod incoming;
mod settings;
mod stream;
mod tls;
mod watched;

pub use fd::raise_open_files_limit;
pub(crate) use gate::Gate;
pub(crate) use incoming::incoming;
pub(crate) use settings::{Prepared, Settings};
pub(crate) use watched::{Deadlines, Watched};
