//! Dispatching one command, and the commands clients send when they connect (`HELLO`,
//! `CLIENT`, `SELECT`, `COMMAND`, `INFO`, `CONFIG GET`, ...), answered as a Redis server would,
//! so that common client libraries connect unchanged. A connection speaks RESP2 until it sends
//! `HELLO 3` (redis-py 8 does by default, go-redis and Lettuce try it), then RESP3.

use super::conn::{Conn, Outcome};
use super::multi::{self, Queue};
use super::{auth, permits, reply, throttle};
use crate::limits::Limits;
use bytes::BytesMut;
use leakgate::Clock;

/// The Redis version this server presents itself as to clients that ask.
const REDIS_VERSION: &str = "6.2.0";

/// Each command this server answers: name, arity (negative: at least that many), first key.
const COMMANDS: &[(&str, i64, i64)] = &[
    ("ping", -1, 0),
    ("echo", 2, 0),
    ("quit", -1, 0),
    ("hello", -1, 0),
    ("auth", -2, 0),
    ("client", -2, 0),
    ("select", 2, 0),
    ("command", -1, 0),
    ("info", -1, 0),
    ("config", -2, 0),
    ("reset", 1, 0),
    ("multi", 1, 0),
    ("exec", 1, 0),
    ("discard", 1, 0),
    ("watch", -2, 1),
    ("unwatch", 1, 0),
    ("cl.throttle", -5, 1),
    ("lg.check", -2, 1),
    ("lg.checkall", -3, 2),
    ("lg.rule", 2, 1),
    ("lg.acquire", 4, 1),
    ("lg.release", 3, 1),
];

fn error(out: &mut BytesMut, text: &str) -> Outcome {
    reply::error(out, text);
    Outcome { error: true, close: false }
}

const OK: Outcome = Outcome { error: false, close: false };

/// Runs the command `args` (name first, never empty) and writes its reply into `out`; within
/// `MULTI`, queues it instead. `MULTI`/`EXEC` run the queued commands one after the other with
/// nothing of the connection's in between (other connections' commands may interleave: this
/// server has no global lock; each decision is atomic on its own).
pub(crate) async fn execute<C: Clock + 'static>(
    limits: &Limits<C>,
    conn: &mut Conn,
    args: &[&[u8]],
    out: &mut BytesMut,
) -> Outcome {
    let name = args[0];
    if let Some(refused) = auth::gate(conn, name, out) {
        return refused;
    }
    let is = |command: &[u8]| name.eq_ignore_ascii_case(command);
    if is(b"multi") {
        if conn.queued.is_some() {
            return error(out, "ERR MULTI calls can not be nested");
        }
        conn.queued = Some(Queue::default());
        reply::simple(out, "OK");
        return OK;
    }
    if is(b"discard") {
        return match conn.queued.take() {
            Some(_) => {
                reply::simple(out, "OK");
                OK
            }
            None => error(out, "ERR DISCARD without MULTI"),
        };
    }
    if is(b"exec") {
        let Some(queue) = conn.queued.take() else {
            return error(out, "ERR EXEC without MULTI");
        };
        let Some(queued) = queue.into_commands() else {
            return error(out, multi::EXECABORT);
        };
        reply::array(out, queued.len());
        let mut outcome = OK;
        for command in &queued {
            let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
            outcome.close |= dispatch(limits, conn, &args, out).await.close;
        }
        return outcome;
    }
    if is(b"watch") || is(b"unwatch") {
        // No key changes under a client's feet here that WATCH could report.
        reply::simple(out, "OK");
        return OK;
    }
    if let Some(queue) = conn.queued.as_mut() {
        if is(b"quit") || is(b"reset") {
            conn.queued = None;
        } else {
            // As Redis does: a command that cannot run is refused now and spoils the
            // transaction, and so is one past the queue's bounds (`multi`).
            let queued = match queueable(args) {
                Ok(()) => queue.push(args),
                Err(why) => {
                    queue.spoil();
                    Err(why)
                }
            };
            return match queued {
                Ok(()) => {
                    reply::simple(out, "QUEUED");
                    OK
                }
                Err(why) => error(out, &why),
            };
        }
    }
    dispatch(limits, conn, args, out).await
}

/// Runs one command.
async fn dispatch<C: Clock + 'static>(
    limits: &Limits<C>,
    conn: &mut Conn,
    args: &[&[u8]],
    out: &mut BytesMut,
) -> Outcome {
    let mut lower = [0u8; 16];
    let name = args[0];
    let command = match lower.get_mut(..name.len()) {
        Some(lower) => {
            lower.copy_from_slice(name);
            lower.make_ascii_lowercase();
            std::str::from_utf8(lower).unwrap_or("")
        }
        None => "",
    };
    match command {
        "cl.throttle" => {
            let error = throttle::cl_throttle(limits, args, out).await;
            Outcome { error, close: false }
        }
        "lg.check" | "lg.checkall" | "lg.rule" => {
            let error = throttle::lg(limits, command, args, conn.resp3, out).await;
            Outcome { error, close: false }
        }
        "lg.acquire" | "lg.release" => {
            let error = permits::command(limits, command, args, out).await;
            Outcome { error, close: false }
        }
        "ping" => match args {
            [_] => {
                reply::simple(out, "PONG");
                OK
            }
            [_, message] => {
                reply::bulk(out, message);
                OK
            }
            _ => arity(out, "ping"),
        },
        "echo" => match args {
            [_, message] => {
                reply::bulk(out, message);
                OK
            }
            _ => arity(out, "echo"),
        },
        "quit" => {
            reply::simple(out, "OK");
            Outcome { error: false, close: true }
        }
        "reset" => {
            conn.name = None;
            conn.resp3 = false;
            conn.queued = None;
            conn.authenticated = false;
            reply::simple(out, "RESET");
            OK
        }
        "hello" => hello(conn, args, out),
        "auth" => auth::auth(conn, args, out),
        "client" => client(conn, args, out),
        "select" => match args.get(1).and_then(|db| throttle::parse_int(db)) {
            // One set of buckets, whichever database a client selects.
            Some(db) if (0..16).contains(&db) => {
                reply::simple(out, "OK");
                OK
            }
            Some(_) => error(out, "ERR DB index is out of range"),
            None => error(out, "ERR value is not an integer or out of range"),
        },
        "command" => command_info(args, conn.resp3, out),
        "info" => {
            let info = format!(
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\n\
                 leakgate_version:{}\r\nleakgate_backend:{}\r\n\r\n# Persistence\r\nloading:0\r\n\
                 \r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
                env!("CARGO_PKG_VERSION"),
                limits.rules.kind(),
            );
            reply::bulk(out, info.as_bytes());
            OK
        }
        "config" => match args.get(1) {
            // No configuration to show: an empty list, as for a parameter that does not exist.
            Some(sub) if sub.eq_ignore_ascii_case(b"get") => {
                reply::map(out, 0, conn.resp3);
                OK
            }
            _ => error(out, "ERR this server's configuration cannot be changed over RESP"),
        },
        _ => unknown(out, args),
    }
}

/// Whether `args` names a command this server has, with a number of arguments it takes (what
/// Redis checks before queueing a command); the error to answer if not.
fn queueable(args: &[&[u8]]) -> Result<(), String> {
    let known = COMMANDS.iter().find(|(name, _, _)| args[0].eq_ignore_ascii_case(name.as_bytes()));
    let Some(&(name, arity, _)) = known else {
        let mut out = BytesMut::new();
        unknown(&mut out, args);
        // The reply without its '-' and line end.
        return Err(String::from_utf8_lossy(&out[1..out.len() - 2]).into_owned());
    };
    let n = args.len() as i64;
    if (arity >= 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(format!("ERR wrong number of arguments for '{name}' command"));
    }
    Ok(())
}

fn arity(out: &mut BytesMut, command: &str) -> Outcome {
    error(out, &format!("ERR wrong number of arguments for '{command}' command"))
}

fn unknown(out: &mut BytesMut, args: &[&[u8]]) -> Outcome {
    let shown = |bytes: &[u8]| String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned();
    let rest: Vec<String> = args[1..].iter().take(4).map(|a| format!("'{}'", shown(a))).collect();
    error(
        out,
        &format!(
            "ERR unknown command '{}', with args beginning with: {}",
            shown(args[0]),
            rest.join(" ")
        ),
    )
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`: switches to RESP2 or RESP3.
fn hello(conn: &mut Conn, args: &[&[u8]], out: &mut BytesMut) -> Outcome {
    let resp3 = match args.get(1).map(|v| throttle::parse_int(v)) {
        None => conn.resp3,
        Some(Some(2)) => false,
        Some(Some(3)) => true,
        Some(_) => return error(out, "NOPROTO unsupported protocol version"),
    };
    let mut rest = args.get(2..).unwrap_or_default();
    while let [option, tail @ ..] = rest {
        if option.eq_ignore_ascii_case(b"auth") && tail.len() >= 2 {
            if let Err(message) = auth::hello_auth(conn, tail[0], tail[1]) {
                return error(out, message);
            }
            rest = &tail[2..];
        } else if option.eq_ignore_ascii_case(b"setname") && !tail.is_empty() {
            conn.name = Some(tail[0].to_vec());
            rest = &tail[1..];
        } else {
            return error(out, "ERR syntax error in HELLO");
        }
    }
    conn.resp3 = resp3;
    reply::map(out, 7, resp3);
    for (field, value) in [
        ("server", "leakgate"),
        ("version", REDIS_VERSION),
        ("proto", ""),
        ("id", ""),
        ("mode", "standalone"),
        ("role", "master"),
        ("modules", ""),
    ] {
        reply::bulk(out, field.as_bytes());
        match field {
            "proto" => reply::integer(out, if resp3 { 3 } else { 2 }),
            "id" => reply::integer(out, conn.id as i64),
            "modules" => reply::array(out, 0),
            _ => reply::bulk(out, value.as_bytes()),
        }
    }
    OK
}

/// `CLIENT SETNAME|GETNAME|ID|SETINFO|INFO|...`.
fn client(conn: &mut Conn, args: &[&[u8]], out: &mut BytesMut) -> Outcome {
    let Some(sub) = args.get(1) else { return arity(out, "client") };
    let is = |name: &[u8]| sub.eq_ignore_ascii_case(name);
    if is(b"setname") && args.len() == 3 {
        conn.name = Some(args[2].to_vec()).filter(|n| !n.is_empty());
        reply::simple(out, "OK");
    } else if is(b"getname") {
        match &conn.name {
            Some(name) => reply::bulk(out, name),
            None => reply::null(out, conn.resp3),
        }
    } else if is(b"id") {
        reply::integer(out, conn.id as i64);
    } else if is(b"info") {
        let name = conn.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        reply::bulk(out, format!("id={} name={name}\n", conn.id).as_bytes());
    } else if is(b"setinfo") || is(b"no-evict") || is(b"no-touch") || is(b"reply") {
        // Library names and eviction hints: nothing to keep here.
        reply::simple(out, "OK");
    } else {
        let sub = String::from_utf8_lossy(sub);
        return error(out, &format!("ERR unknown subcommand '{sub}' for CLIENT"));
    }
    OK
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND DOCS`, `COMMAND INFO name...`, `COMMAND LIST`.
fn command_info(args: &[&[u8]], resp3: bool, out: &mut BytesMut) -> Outcome {
    let entry = |out: &mut BytesMut, &(name, arity, first): &(&str, i64, i64)| {
        reply::array(out, 6);
        reply::bulk(out, name.as_bytes());
        reply::integer(out, arity);
        reply::array(out, 0);
        reply::integer(out, first);
        reply::integer(out, first);
        reply::integer(out, i64::from(first > 0));
    };
    match args.get(1) {
        None => {
            reply::array(out, COMMANDS.len());
            for command in COMMANDS {
                entry(out, command);
            }
        }
        Some(sub) if sub.eq_ignore_ascii_case(b"count") => {
            reply::integer(out, COMMANDS.len() as i64);
        }
        Some(sub) if sub.eq_ignore_ascii_case(b"list") => {
            reply::array(out, COMMANDS.len());
            for (name, _, _) in COMMANDS {
                reply::bulk(out, name.as_bytes());
            }
        }
        Some(sub) if sub.eq_ignore_ascii_case(b"docs") => reply::map(out, 0, resp3),
        Some(sub) if sub.eq_ignore_ascii_case(b"info") => {
            reply::array(out, args.len() - 2);
            for asked in &args[2..] {
                match COMMANDS
                    .iter()
                    .find(|(name, _, _)| asked.eq_ignore_ascii_case(name.as_bytes()))
                {
                    Some(command) => entry(out, command),
                    None => reply::null(out, resp3),
                }
            }
        }
        Some(sub) => {
            let sub = String::from_utf8_lossy(sub);
            return error(out, &format!("ERR unknown subcommand '{sub}' for COMMAND"));
        }
    }
    OK
}
