//! `AUTH` over RESP, as Redis answers it, when the service has a secret (`--auth-file`).
//!
//! A connection starts unauthenticated. Until it sends `AUTH <secret>`, `AUTH default <secret>`
//! (Redis 6's form, user `default`) or `HELLO <proto> AUTH default <secret>`, every command but
//! `AUTH`, `HELLO`, `PING`, `QUIT` and `RESET` is answered `-NOAUTH Authentication required.`
//! A wrong secret is answered `-WRONGPASS invalid username-password pair or user is disabled.`
//! and changes nothing; `RESET` makes the connection unauthenticated again, as in Redis. With
//! no secret, every connection is authenticated and `AUTH` is refused (there is no password to
//! check).

use super::conn::{Conn, Outcome};
use super::reply;
use bytes::BytesMut;

const NOAUTH: &str = "NOAUTH Authentication required.";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// The only user there is, as Redis names it.
const USER: &[u8] = b"default";

/// `Some` (an error reply written) when `command` may not run yet on `conn`. As in Redis, a
/// command refused so within `MULTI` spoils the transaction (`EXEC` answers `EXECABORT`).
pub(super) fn gate(conn: &mut Conn, command: &[u8], out: &mut BytesMut) -> Option<Outcome> {
    if conn.authenticated() {
        return None;
    }
    let allowed: [&[u8]; 5] = [b"auth", b"hello", b"ping", b"quit", b"reset"];
    if allowed.iter().any(|name| command.eq_ignore_ascii_case(name)) {
        return None;
    }
    if let Some(queue) = conn.queued.as_mut() {
        queue.spoil();
    }
    reply::error(out, NOAUTH);
    Some(Outcome { error: true, close: false })
}

/// `AUTH [user] password`.
pub(super) fn auth(conn: &mut Conn, args: &[&[u8]], out: &mut BytesMut) -> Outcome {
    let (user, password) = match args {
        [_, password] => (USER, *password),
        [_, user, password] => (*user, *password),
        _ => {
            reply::error(out, "ERR syntax error");
            return Outcome { error: true, close: false };
        }
    };
    match check(conn, user, password) {
        Ok(()) => {
            reply::simple(out, "OK");
            Outcome::default()
        }
        Err(message) => {
            reply::error(out, message);
            Outcome { error: true, close: false }
        }
    }
}

/// `HELLO`'s `AUTH user password`: `Err` with the error to answer instead of `HELLO`'s map.
pub(super) fn hello_auth(
    conn: &mut Conn,
    user: &[u8],
    password: &[u8],
) -> Result<(), &'static str> {
    check(conn, user, password)
}

/// Authenticates `conn` if `user`/`password` are right.
fn check(conn: &mut Conn, user: &[u8], password: &[u8]) -> Result<(), &'static str> {
    let Some(secret) = &conn.secret else {
        return Err("ERR no password is set on this server: AUTH is not needed");
    };
    // Both compared, whatever the first says, so the time taken does not tell which was wrong.
    let user_ok = user == USER;
    let password_ok = secret.matches(password);
    if user_ok && password_ok {
        conn.authenticated = true;
        Ok(())
    } else {
        Err(WRONGPASS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Secret;
    use crate::resp::multi::Queue;
    use std::sync::Arc;

    #[test]
    fn a_command_refused_for_noauth_within_multi_spoils_the_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, b"s3cret\n").unwrap();
        let secret = Arc::new(Secret::from_file(&path).unwrap());
        let mut queue = Queue::default();
        queue.push(&[b"PING"]).unwrap();
        let mut conn = Conn { secret: Some(secret), queued: Some(queue), ..Conn::default() };
        let mut out = BytesMut::new();
        // PING may run unauthenticated, and leaves the transaction as it is.
        assert!(gate(&mut conn, b"ping", &mut out).is_none());
        assert!(out.is_empty());
        let refused = gate(&mut conn, b"CL.THROTTLE", &mut out).unwrap();
        assert!(refused.error && !refused.close);
        assert_eq!(&out[..], b"-NOAUTH Authentication required.\r\n");
        // As Redis does (flagTransaction): EXEC will answer EXECABORT, and nothing queued is kept.
        assert!(conn.queued.take().unwrap().into_commands().is_none());
    }
}
