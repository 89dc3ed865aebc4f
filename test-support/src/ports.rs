//! Free loopback ports, and whether something answers on one.
//!
//! ```
//! let port = leakgate_test_support::free_port();
//! assert!(port > 0);
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A port on 127.0.0.1 that was free a moment ago, drawn at random from below the kernel's
/// ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`). A listener bound to port 0 gets
/// its port from that range, so a server started here cannot take the port of a listener
/// another test has just closed (and make a "nothing listens there any more" check fail).
/// Another process may still take the port before the caller binds it: launchers retry on
/// another port when their server cannot bind. Falls back to the kernel's pick.
///
/// ```
/// let port = leakgate_test_support::free_port();
/// std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
/// ```
pub fn free_port() -> u16 {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let low = 10_000u16;
    if ephemeral > low + 1000 {
        for _ in 0..100 {
            let port = low + (random() % u64::from(ephemeral - low)) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// 64 bits that differ from call to call (std's randomly keyed hasher).
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new().build_hasher().finish()
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
