//! Every listener against hostile clients: a cap on connections open at once (one more is told
//! so), a request that never finishes is closed within the header timeout, a silent connection
//! within the idle timeout, and live clients are served all along. Deadlines are short here;
//! the assertions are on what the client sees (the close, the refusal), never on timings
//! beyond a generous bound.

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use leakgate::ManualClock;
use leakgate_serve::Config;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{any_port, exchange, http_get, raw, serve_with, Served};

/// Every listener, at most `cap` connections each, with these timeouts.
fn serve(cap: usize, header: Duration, idle: Duration) -> Served<ManualClock> {
    serve_with("rules.toml", "api = \"10/s\"\n", ManualClock::new(), |c: Config| {
        c.resp(any_port())
            .grpc(any_port())
            .http(any_port())
            .max_connections(cap)
            .header_timeout(header)
            .idle_timeout(idle)
    })
}

/// What the server sends before it closes `stream`, waiting at most 20 s; panics if the
/// connection is still open then.
fn read_until_closed(stream: &mut TcpStream) -> String {
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Whether the server still keeps `stream` open (whatever it sends, no close) after `wait`.
fn still_open(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => {} // HTTP/2's SETTINGS
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// A request with one descriptor, `api/user/u`.
fn request() -> RateLimitRequest {
    let entry = Entry { key: "user".into(), value: "u".into() };
    let descriptor = RateLimitDescriptor { entries: vec![entry], ..Default::default() };
    RateLimitRequest { domain: "api".into(), descriptors: vec![descriptor], ..Default::default() }
}

fn grpc_works(served: &Served<ManualClock>) {
    let url = format!("http://{}", served.grpc());
    let answer = served.runtime.block_on(async {
        let mut client = RateLimitServiceClient::connect(url).await?;
        let request = request();
        Ok::<_, Box<dyn std::error::Error>>(client.should_rate_limit(request).await?)
    });
    assert!(answer.is_ok(), "gRPC: {answer:?}");
}

#[test]
fn resp_beyond_the_cap_is_told_max_number_of_clients() {
    let served = serve(2, Duration::from_secs(30), Duration::from_secs(60));
    let mut first = raw(served.resp());
    let mut second = raw(served.resp());
    exchange(&mut first, b"PING\r\n", "+PONG\r\n");
    exchange(&mut second, b"PING\r\n", "+PONG\r\n");
    let mut third = raw(served.resp());
    assert_eq!(read_until_closed(&mut third), "-ERR max number of clients reached\r\n");
    // A slot freed is taken again.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut next = raw(served.resp());
        next.write_all(b"PING\r\n").unwrap();
        let mut reply = [0u8; 7];
        if next.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot was never taken again");
        std::thread::sleep(Duration::from_millis(20));
    }
    exchange(&mut second, b"PING\r\n", "+PONG\r\n");
}

#[test]
fn resp_half_a_command_is_closed_after_the_header_timeout() {
    let served = serve(100, Duration::from_millis(500), Duration::from_secs(60));
    let mut slow = raw(served.resp());
    let mut live = raw(served.resp());
    // Pipelined: a whole command is answered, the half after it is given 500 ms.
    slow.write_all(b"PING\r\n*2\r\n$4\r\nECHO\r\n$5\r\nhel").unwrap();
    assert_eq!(read_until_closed(&mut slow), "+PONG\r\n");
    // Trickling keeps no command alive past the timeout either.
    let mut trickle = raw(served.resp());
    let started = Instant::now();
    let mut closed = false;
    for byte in b"*2\r\n$4\r\nECHO\r\n$100\r\n".iter().cycle().take(200) {
        if trickle.write_all(&[*byte]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        if started.elapsed() > Duration::from_secs(8) {
            break;
        }
    }
    assert!(closed || read_until_closed(&mut trickle).is_empty(), "the trickling client stayed");
    // Meanwhile a client that sends whole commands is served.
    exchange(&mut live, b"PING\r\n", "+PONG\r\n");
}

#[test]
fn resp_an_idle_connection_is_closed_and_a_busy_one_kept() {
    let served = serve(100, Duration::from_secs(5), Duration::from_millis(600));
    let mut idle = raw(served.resp());
    let mut busy = raw(served.resp());
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        exchange(&mut busy, b"PING\r\n", "+PONG\r\n");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(read_until_closed(&mut idle), "");
    exchange(&mut busy, b"PING\r\n", "+PONG\r\n");
}

#[test]
fn http_half_a_header_is_closed_after_the_header_timeout() {
    let served = serve(100, Duration::from_millis(500), Duration::from_secs(60));
    let mut slow = raw(served.http());
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0").unwrap();
    let answer = read_until_closed(&mut slow);
    assert!(!answer.contains("200 OK"), "{answer}");
    // A kept-alive connection that sends no next request is closed too.
    let mut kept = raw(served.http());
    let addr = served.http();
    write!(kept, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let answer = read_until_closed(&mut kept);
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(http_get(served.http(), "/metrics").contains("leakgate_rules_in_force"));
}

#[test]
fn http_beyond_the_cap_is_answered_503() {
    let served = serve(1, Duration::from_secs(30), Duration::from_secs(60));
    let held = raw(served.http());
    std::thread::sleep(Duration::from_millis(200)); // the first is taken before the second
    let mut second = raw(served.http());
    let answer = read_until_closed(&mut second);
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
    drop(held);
}

#[test]
fn grpc_half_a_preface_is_closed_and_the_cap_holds() {
    let served = serve(2, Duration::from_millis(500), Duration::from_secs(60));
    let mut slow = raw(served.grpc());
    slow.write_all(b"PRI * HTTP/2.0\r\n").unwrap(); // 16 of the preface's 24 bytes
    read_until_closed(&mut slow);
    // Two silent connections fill the cap; a third is closed at once, well before the header
    // timeout would close it.
    let served = serve(2, Duration::from_secs(60), Duration::from_secs(60));
    let mut held: Vec<TcpStream> = (0..2).map(|_| raw(served.grpc())).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut third = raw(served.grpc());
    let refused_at = Instant::now();
    read_until_closed(&mut third);
    assert!(refused_at.elapsed() < Duration::from_secs(30), "closed for the cap, not the timeout");
    assert!(still_open(&mut held[0], Duration::from_millis(300)));
    held.clear();
    std::thread::sleep(Duration::from_millis(200));
    grpc_works(&served);
}

#[test]
fn grpc_clients_that_answer_pings_are_kept_silent_ones_closed() {
    let served = serve(100, Duration::from_millis(500), Duration::from_millis(800));
    let mut silent = raw(served.grpc());
    silent.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap(); // the whole preface, then nothing
    read_until_closed(&mut silent);
    // A real client, quiet for longer than the idle timeout, still calls on its connection.
    let url = format!("http://{}", served.grpc());
    let calls = served.runtime.block_on(async {
        let mut client = RateLimitServiceClient::connect(url).await?;
        let request = request();
        client.should_rate_limit(request.clone()).await?;
        tokio::time::sleep(Duration::from_millis(2000)).await;
        client.should_rate_limit(request).await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    });
    assert!(calls.is_ok(), "{calls:?}");
}

/// Writes `request` over and over on a new connection to `addr`, never reading a reply, until
/// a write fails; the failure. A server that blocks on its reply for good makes the writes
/// block too: that is a `WouldBlock`/`TimedOut` after 10 s.
fn write_without_reading(addr: std::net::SocketAddr, request: &[u8]) -> std::io::ErrorKind {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Err(e) = s.write_all(request) {
            return e.kind();
        }
    }
    panic!("the server took a minute of requests without a reply being read");
}

#[test]
fn a_client_that_takes_no_reply_loses_its_connection() {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
    let served = serve(100, Duration::from_millis(500), Duration::from_secs(60));
    // RESP: each command asks for 64 KiB back.
    let echo = format!("*2\r\n$4\r\nECHO\r\n$65536\r\n{}\r\n", "x".repeat(65536));
    let kind = write_without_reading(served.resp(), echo.as_bytes());
    assert!(matches!(kind, BrokenPipe | ConnectionReset), "RESP: {kind:?}");
    // HTTP: pipelined requests whose answers pile up unread.
    let get = format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", served.http());
    let kind = write_without_reading(served.http(), get.repeat(64).as_bytes());
    assert!(matches!(kind, BrokenPipe | ConnectionReset), "HTTP: {kind:?}");
    exchange(&mut raw(served.resp()), b"PING\r\n", "+PONG\r\n");
}

/// A graceful stop closes every listener's port before it returns: nothing accepts a connection
/// once `stop` is back. The gRPC and HTTP listeners accepted in a task of their own that closed
/// the socket only when it next ran, so a connection made at once after the stop could still be
/// accepted (a flake in `fleet.rs`'s graceful-stop test, about 1 run in 4 under load). Two
/// hundred stops make that race show without timing anything (before the fix this failed at
/// rounds 76 and 73, 2 runs of 2; after it, none).
#[test]
fn no_listener_accepts_once_a_stop_returns() {
    for round in 0..200 {
        let mut served = serve(8, Duration::from_secs(5), Duration::from_secs(5));
        let ports = [served.resp(), served.grpc(), served.http()];
        served.stop();
        for port in ports {
            assert!(TcpStream::connect(port).is_err(), "round {round}: {port} still accepts");
        }
    }
}
