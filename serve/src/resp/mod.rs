//! The Redis protocol listener: redis-cell's `CL.THROTTLE`, the rules commands, and what clients
//! send when they connect (see `commands`), over RESP2.
//!
//! * `parse`: requests, incrementally, allocating nothing a peer merely claims;
//! * `reply`: RESP2 replies;
//! * `commands`: dispatch and the connection commands;
//! * `multi`: what `MULTI` queues, bounded in commands and bytes;
//! * `throttle`: the limit commands.
//!
//! Each connection is one task: it parses every whole command its bytes hold, answers them in
//! order into one buffer, and writes that buffer once, so pipelined commands cost one write per
//! read. Commands of one connection are decided one after the other, in the order sent (as
//! Redis runs them), so a pipeline on one key sees the same answers as the same commands sent
//! one at a time.

mod commands;
mod multi;
mod parse;
mod reply;
mod throttle;

use crate::limits::Limits;
use crate::metrics::Listener;
use bytes::{Buf, BytesMut};
use commands::{execute, Conn};
use leakgate::Clock;
use parse::{Parser, Step};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long a shutdown waits for connections to finish the commands they have read.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves RESP on `listener` until `shutdown` turns true; then stops accepting, lets every
/// connection answer what it has read, and returns.
pub(crate) async fn serve<C: Clock + 'static>(
    listener: TcpListener,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
    max_connections: usize,
) {
    let mut connections = JoinSet::new();
    let ids = AtomicU64::new(1);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                if connections.len() >= max_connections {
                    tracing::warn!(%peer, max_connections, "RESP: refused a connection: too many");
                    connections.spawn(refuse(stream));
                    continue;
                }
                let id = ids.fetch_add(1, Ordering::Relaxed);
                connections.spawn(connection(stream, limits.clone(), shutdown.clone(), id));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let drained =
        tokio::time::timeout(DRAIN, async { while connections.join_next().await.is_some() {} });
    if drained.await.is_err() {
        tracing::warn!("RESP: connections still open after {DRAIN:?}: closed");
    }
}

async fn refuse(mut stream: TcpStream) {
    let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
}

/// One connection, until the peer closes it, sends `QUIT`, or the server shuts down.
async fn connection<C: Clock + 'static>(
    mut stream: TcpStream,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
    id: u64,
) {
    let _ = stream.set_nodelay(true);
    let stats = limits.metrics.listener(Listener::Resp);
    let mut buf = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    let mut parser = Parser::default();
    let mut conn = Conn { id, ..Conn::default() };
    loop {
        let mut close = false;
        loop {
            let started = Instant::now();
            match parser.next(&buf) {
                Step::Command => {
                    let ranges = parser.args();
                    let mut inline: [&[u8]; 8] = [&[]; 8];
                    let spilled: Vec<&[u8]>;
                    let args: &[&[u8]] = if ranges.len() <= inline.len() {
                        for (slot, range) in inline.iter_mut().zip(ranges) {
                            *slot = &buf[range.clone()];
                        }
                        &inline[..ranges.len()]
                    } else {
                        // More than 8 arguments (LG.CHECKALL): rare enough to allocate.
                        spilled = ranges.iter().map(|r| &buf[r.clone()]).collect();
                        &spilled
                    };
                    let outcome = execute(&limits, &mut conn, args, &mut out).await;
                    stats.record(started.elapsed(), outcome.error);
                    if outcome.close {
                        close = true;
                        break;
                    }
                }
                Step::Error(message) => {
                    reply::error(&mut out, message);
                    stats.record(started.elapsed(), true);
                }
                Step::NeedMore => break,
            }
        }
        let consumed = parser.consumed();
        buf.advance(consumed);
        parser.dropped(consumed);
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if close || *shutdown.borrow() {
            return;
        }
        // Room for what arrives; the buffer never holds more than one unfinished command
        // (bounded by the parser) plus one read.
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        tokio::select! {
            read = stream.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = shutdown.changed() => return,
        }
    }
}
