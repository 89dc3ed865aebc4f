//! Free loopback ports, and whether something answers on one.
//!
//! ```
//! let port = leakgate_test_support::free_port();
//! assert!(port > 0);
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A port on 127.0.0.1 that was free a moment ago (the kernel's pick). Another process may take
/// it before the caller binds it: launchers retry on another port when their server cannot
/// bind.
///
/// ```
/// let port = leakgate_test_support::free_port();
/// std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
/// ```
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Whether a Redis server (or anything speaking RESP) answers `PING` on `port` within 200 ms.
///
/// ```
/// assert!(!leakgate_test_support::ports::answers_ping(leakgate_test_support::free_port()));
/// ```
pub fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}
