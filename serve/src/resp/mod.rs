//! The Redis protocol listener: redis-cell's `CL.THROTTLE`, the rules commands, and what clients
//! send when they connect (see `commands`), over RESP2.
//!
//! * `parse`: requests, incrementally, allocating nothing a peer merely claims;
//! * `reply`: RESP2 replies;
//! * `commands`: dispatch and the connection commands;
//! * `multi`: what `MULTI` queues, bounded in commands and bytes;
//! * `throttle`: the limit commands.
//!
//! Connections come through a [`Gate`](crate::listen::Gate): at most the listener's cap at
//! once, the next one told `-ERR max number of clients reached`. A command must arrive whole
//! within the header timeout of its first byte, a connection with no unfinished command is
//! closed after the idle timeout, and a reply the client does not take within the header
//! timeout closes it too (see `serve/README.md`).
//!
//! Each connection is one task: it parses every whole command its bytes hold, answers them in
//! order into one buffer, and writes that buffer once, so pipelined commands cost one write per
//! read. Commands of one connection are decided one after the other, in the order sent (as
//! Redis runs them), so a pipeline on one key sees the same answers as the same commands sent
//! one at a time.

mod auth;
mod commands;
mod conn;
mod multi;
mod parse;
mod permits;
mod reply;
mod throttle;

use crate::auth::Secret;
use crate::limits::Limits;
use crate::listen::{Deadlines, Gate};
use crate::metrics::Listener;
use bytes::{Buf, BytesMut};
use commands::execute;
use conn::Conn;
use leakgate::Clock;
use parse::{Parser, Step};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::task::JoinSet;

/// How long a shutdown waits for connections to finish the commands they have read.
const DRAIN: Duration = Duration::from_secs(5);

/// What a refused client reads, as Redis words it.
pub(crate) const REFUSAL: &[u8] = b"-ERR max number of clients reached\r\n";

/// Serves RESP through `gate` until `shutdown` turns true; then stops accepting, lets every
/// connection answer what it has read, and returns. With `secret`, connections must `AUTH`.
pub(crate) async fn serve<C: Clock + 'static>(
    mut gate: Gate,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
    secret: Option<Arc<Secret>>,
    deadlines: Deadlines,
) {
    let mut connections = JoinSet::new();
    let ids = AtomicU64::new(1);
    loop {
        tokio::select! {
            accepted = gate.accept() => {
                // Ids only tell connections apart (CLIENT ID): no ordering with anything else.
                let id = ids.fetch_add(1, Ordering::Relaxed);
                let conn = Conn { id, secret: secret.clone(), ..Conn::default() };
                let (stream, slot, stop) = (accepted.stream, accepted.slot, shutdown.clone());
                connections.spawn(connection(stream, slot, limits.clone(), stop, conn, deadlines));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(gate);
    let drained =
        tokio::time::timeout(DRAIN, async { while connections.join_next().await.is_some() {} });
    if drained.await.is_err() {
        tracing::warn!("RESP: connections still open after {DRAIN:?}: closed");
    }
}

/// One connection, until the peer closes it, sends `QUIT`, misses a deadline, or the server
/// shuts down; `_slot` is its place in the listener's cap.
async fn connection<C: Clock + 'static>(
    mut stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    limits: Arc<Limits<C>>,
    mut shutdown: watch::Receiver<bool>,
    mut conn: Conn,
    deadlines: Deadlines,
) {
    let _ = stream.set_nodelay(true);
    let stats = limits.metrics.listener(Listener::Resp);
    let mut buf = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    let mut parser = Parser::default();
    // When the unfinished command at the end of `buf` began to arrive (`None`: there is none).
    let mut unfinished_since: Option<Instant> = None;
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
        // A new command starts its clock once the one before it is whole.
        if buf.is_empty() {
            unfinished_since = None;
        } else if consumed > 0 || unfinished_since.is_none() {
            unfinished_since = Some(Instant::now());
        }
        if !out.is_empty() {
            // A client that takes no reply within the header timeout loses its connection.
            let written = tokio::time::timeout(deadlines.header, stream.write_all(&out)).await;
            if !matches!(written, Ok(Ok(()))) {
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
        // The next bytes are due: the rest of an unfinished command within the header timeout
        // of its first byte; a new command within the idle timeout (if any).
        let due = match unfinished_since {
            Some(since) => Some(since + deadlines.header),
            None => deadlines.idle.map(|idle| Instant::now() + idle),
        };
        let late = async {
            match due {
                Some(due) => tokio::time::sleep_until(due.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            read = stream.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = late => {
                tracing::debug!(id = conn.id, "RESP: closed a connection: past its deadline");
                return;
            }
            _ = shutdown.changed() => return,
        }
    }
}
