//! [`incoming`]: a listener's connections as hyper and tonic take them: through the gate,
//! through the TLS handshake (if any) and under deadlines.
//!
//! One task accepts; each TLS handshake runs in a task of its own, within the header timeout
//! of the accept, so a client that stalls its handshake holds only its own slot. Connections
//! ready to serve go into a channel; the accepting stops, and the listener is closed, once the
//! receiver is dropped. The accepting task's handle is returned too: a listener that stops drops
//! the receiver, then awaits the handle, so that its port is closed when the stop returns (else
//! a graceful stop returned while the socket still accepted, until the task next ran).

use super::gate::{Accepted, Gate};
use super::stream::Stream;
use super::watched::{Deadlines, Watched};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Connections ready to serve that wait for the server to take them.
const READY: usize = 64;

/// Starts accepting through `gate` (with TLS when `tls` is given); each connection must read
/// `first` bytes within the header timeout (see [`Watched`]). Returns the connections, and the
/// accepting task, which ends (closing the listener) once the receiver is dropped.
pub(crate) fn incoming(
    mut gate: Gate,
    tls: Option<TlsAcceptor>,
    first: usize,
    deadlines: Deadlines,
) -> (mpsc::Receiver<Watched>, JoinHandle<()>) {
    let (ready, taken) = mpsc::channel(READY);
    let accepting = tokio::spawn(async move {
        let mut handshakes = JoinSet::new();
        loop {
            tokio::select! {
                Accepted { stream, slot, peer } = gate.accept() => {
                    let accepted = Instant::now();
                    let _ = stream.set_nodelay(true);
                    let Some(tls) = tls.clone() else {
                        let conn = Watched::new(Stream::Plain(stream), slot, accepted, first, deadlines);
                        if ready.send(conn).await.is_err() {
                            break;
                        }
                        continue;
                    };
                    let ready = ready.clone();
                    handshakes.spawn(async move {
                        let due = accepted + deadlines.header;
                        match tokio::time::timeout_at(due, tls.accept(stream)).await {
                            Ok(Ok(stream)) => {
                                let stream = Stream::Tls(Box::new(stream));
                                let conn = Watched::new(stream, slot, accepted, first, deadlines);
                                let _ = ready.send(conn).await;
                            }
                            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake: too slow, closed"),
                        }
                    });
                }
                Some(_) = handshakes.join_next(), if !handshakes.is_empty() => {}
                _ = ready.closed() => break,
            }
        }
    });
    (taken, accepting)
}

impl Connected for Watched {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        let tcp = self.get_ref().tcp();
        TcpConnectInfo { local_addr: tcp.local_addr().ok(), remote_addr: tcp.peer_addr().ok() }
    }
}
