//! Authentication (`--auth-file`), TLS (`--tls-cert`, `--tls-key`, `--tls-client-ca`) and the
//! HTTP `Host` check, with real clients: the `redis` crate (RESP2 `AUTH` and RESP3 `HELLO 3
//! AUTH`), `redis-cli -a`, a tonic gRPC client (bearer metadata, TLS, client certificates),
//! curl, and the page in headless Chromium. Certificates are made here (rcgen) in a temporary
//! folder removed at the end.

mod support;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use leakgate::ManualClock;
use leakgate_serve::Config;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::chromium::Chromium;
use support::{any_port, exchange, raw, read_reply, serve_with, Served};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const SECRET: &str = "s3cret-0123456789abcdef";
const RULES: &str = "api = \"10/s\"\nmessage_send = \"10/s\"\n";

/// A folder with the secret (`secret`) and a throwaway PKI: `ca.pem`, `server.pem` and
/// `server.key` (for `localhost` and 127.0.0.1), `client.pem` and `client.key`.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("secret", &format!("{SECRET}\n"));
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "leakgate test CA");
        write("ca.pem", &ca.self_signed(&ca_key).unwrap().pem());
        let issuer = Issuer::new(ca, ca_key);
        for (name, names) in
            [("server", vec!["localhost", "127.0.0.1"]), ("client", vec!["client"])]
        {
            let key = KeyPair::generate().unwrap();
            let names: Vec<String> = names.into_iter().map(String::from).collect();
            let mut params = CertificateParams::new(names).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            let cert = params.signed_by(&key, &issuer).unwrap();
            write(&format!("{name}.pem"), &cert.pem());
            write(&format!("{name}.key"), &key.serialize_pem());
        }
        Files { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }
}

/// Every listener, asking for the secret; gRPC and HTTP behind TLS when `tls` (and asking for
/// client certificates when `client_ca`).
fn serve(files: &Files, tls: bool, client_ca: bool) -> Served<ManualClock> {
    serve_with("rules.toml", RULES, ManualClock::new(), |c: Config| {
        let mut c = c.resp(any_port()).grpc(any_port()).http(any_port());
        c = c.auth_file(files.path("secret"));
        if tls {
            c = c.tls(files.path("server.pem"), files.path("server.key"));
        }
        if client_ca {
            c = c.tls_client_ca(files.path("ca.pem"));
        }
        c
    })
}

#[test]
fn resp_asks_for_auth_as_redis_does() {
    let files = Files::new();
    let served = serve(&files, false, false);
    let mut s = raw(served.resp());
    exchange(&mut s, b"PING\r\n", "+PONG\r\n");
    exchange(&mut s, b"CL.THROTTLE k 1 1 60\r\n", "-NOAUTH Authentication required.\r\n");
    exchange(&mut s, b"MULTI\r\n", "-NOAUTH Authentication required.\r\n");
    exchange(&mut s, b"LG.CHECK api/x\r\n", "-NOAUTH Authentication required.\r\n");
    let wrong = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    exchange(&mut s, b"AUTH nope\r\n", wrong);
    exchange(&mut s, format!("AUTH someone {SECRET}\r\n").as_bytes(), wrong);
    exchange(&mut s, b"AUTH a b c\r\n", "-ERR syntax error\r\n");
    exchange(&mut s, b"CL.THROTTLE k 1 1 60\r\n", "-NOAUTH Authentication required.\r\n");
    exchange(&mut s, format!("AUTH {SECRET}\r\n").as_bytes(), "+OK\r\n");
    exchange(&mut s, b"CL.THROTTLE k 1 1 60\r\n", "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n");
    // RESET forgets the authentication, as in Redis.
    exchange(&mut s, b"RESET\r\n", "+RESET\r\n");
    exchange(&mut s, b"CL.THROTTLE k 1 1 60\r\n", "-NOAUTH Authentication required.\r\n");
    exchange(&mut s, format!("AUTH default {SECRET}\r\n").as_bytes(), "+OK\r\n");
    exchange(&mut s, b"CL.THROTTLE k 1 1 60\r\n", "*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:120\r\n");
    // HELLO 3 AUTH: a wrong secret changes nothing; the right one switches and authenticates.
    let mut h = raw(served.resp());
    exchange(&mut h, b"HELLO 3 AUTH default nope\r\n", wrong);
    h.write_all(format!("HELLO 3 AUTH default {SECRET}\r\n").as_bytes()).unwrap();
    assert!(read_reply(&mut h).starts_with("%7\r\n"));
    h.write_all(b"LG.CHECK api/x\r\n").unwrap();
    assert!(read_reply(&mut h).starts_with("*5\r\n:0\r\n:9\r\n:-1\r\n:100\r\n"));
}

#[test]
fn real_redis_clients_authenticate() {
    let files = Files::new();
    let served = serve(&files, false, false);
    let port = served.resp().port();
    // The redis crate: RESP2 (AUTH <secret>) and RESP3 (HELLO 3 AUTH default <secret>).
    for query in ["", "?protocol=resp3"] {
        let url = format!("redis://:{SECRET}@127.0.0.1:{port}/{query}");
        let mut con = redis::Client::open(url).unwrap().get_connection().expect("connect");
        let reply: Vec<i64> = redis::cmd("CL.THROTTLE")
            .arg(format!("crate{query}"))
            .arg(4)
            .arg(1)
            .arg(60)
            .query(&mut con)
            .unwrap();
        assert_eq!(reply, [0, 5, 4, -1, 60], "{query}");
        let url = format!("redis://:wrong@127.0.0.1:{port}/{query}");
        let refused = redis::Client::open(url).unwrap().get_connection().map(|_| ());
        let refused = refused.expect_err("a wrong secret").to_string();
        assert!(refused.contains("WRONGPASS") || refused.contains("uthentication"), "{refused}");
    }
    // redis-cli -a.
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--no-auth-warning"])
            .args(args)
            .output()
            .expect("redis-cli (scripts/ensure-serve-tools.sh installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    assert_eq!(cli(&["-a", SECRET, "CL.THROTTLE", "cli", "4", "1", "60"]), "0\n5\n4\n-1\n60\n");
    assert!(cli(&["CL.THROTTLE", "cli", "4", "1", "60"]).contains("NOAUTH"));
    assert!(cli(&["-a", "wrong", "CL.THROTTLE", "cli", "4", "1", "60"]).contains("NOAUTH"));
}

/// One `ShouldRateLimit` call on `channel`, with `authorization: <bearer>` if given.
fn grpc_call(
    served: &Served<ManualClock>,
    channel: Channel,
    bearer: Option<&str>,
) -> Result<(), tonic::Status> {
    let entry = Entry { key: "user".into(), value: "u".into() };
    let descriptor = RateLimitDescriptor { entries: vec![entry], ..Default::default() };
    let call = RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor],
        ..Default::default()
    };
    let mut request = tonic::Request::new(call);
    if let Some(bearer) = bearer {
        request.metadata_mut().insert("authorization", bearer.parse().unwrap());
    }
    served.runtime.block_on(async move {
        RateLimitServiceClient::new(channel).should_rate_limit(request).await.map(|_| ())
    })
}

fn plain_channel(served: &Served<ManualClock>) -> Channel {
    let url = format!("http://{}", served.grpc());
    served.runtime.block_on(Channel::from_shared(url).unwrap().connect()).expect("connect")
}

fn tls_channel(
    served: &Served<ManualClock>,
    files: &Files,
    client_cert: bool,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(files.text("ca.pem")))
        .domain_name("localhost");
    if client_cert {
        tls = tls.identity(Identity::from_pem(files.text("client.pem"), files.text("client.key")));
    }
    // The certificate is checked for "localhost" (domain_name), on the bound address.
    let url = format!("https://{}", served.grpc());
    let endpoint = Channel::from_shared(url).unwrap().tls_config(tls)?;
    served.runtime.block_on(endpoint.connect())
}

#[test]
fn grpc_asks_for_the_bearer_and_serves_over_tls() {
    let files = Files::new();
    let served = serve(&files, false, false);
    let bearer = format!("Bearer {SECRET}");
    let refused = grpc_call(&served, plain_channel(&served), None).unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let wrong = grpc_call(&served, plain_channel(&served), Some("Bearer nope")).unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::Unauthenticated);
    grpc_call(&served, plain_channel(&served), Some(&bearer)).expect("the bearer lets it in");
    drop(served);
    // TLS, the server's certificate checked against the test CA.
    let served = serve(&files, true, false);
    let channel = tls_channel(&served, &files, false).expect("a TLS connection");
    grpc_call(&served, channel.clone(), Some(&bearer)).expect("over TLS");
    let refused = grpc_call(&served, channel, None).unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    assert!(grpc_call(&served, plain_channel(&served), Some(&bearer)).is_err(), "plain refused");
    drop(served);
    // Client certificates: none, no call.
    let served = serve(&files, true, true);
    let without = tls_channel(&served, &files, false)
        .map_err(|e| tonic::Status::unavailable(e.to_string()))
        .and_then(|channel| grpc_call(&served, channel, Some(&bearer)));
    assert!(without.is_err(), "no client certificate, no call");
    let channel = tls_channel(&served, &files, true).expect("with a client certificate");
    grpc_call(&served, channel, Some(&bearer)).expect("a client the CA signed");
}

/// `GET path` with these extra header lines; the whole response.
fn http(addr: SocketAddr, path: &str, headers: &str) -> String {
    let mut s = raw(addr);
    write!(s, "GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn http_asks_for_the_bearer_and_checks_the_host() {
    let files = Files::new();
    let served = serve(&files, false, false);
    let addr = served.http();
    let host = format!("Host: {addr}\r\n");
    let bearer = format!("Authorization: Bearer {SECRET}\r\n");
    for path in ["/metrics", "/buckets"] {
        let refused = http(addr, path, &host);
        assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
        assert!(refused.contains("www-authenticate: Bearer realm=\"leakgate\""), "{refused}");
        let wrong = http(addr, path, &format!("{host}Authorization: Bearer nope\r\n"));
        assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
        let ok = http(addr, path, &format!("{host}{bearer}"));
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    }
    // The page holds no data: served without the secret, it asks for it.
    let page = http(addr, "/", &host);
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("id=\"login\""), "{page}");
    // DNS rebinding: a name other than localhost is refused, secret or not.
    for (host, allowed) in [
        ("evil.example".to_string(), false),
        (format!("evil.example:{}", addr.port()), false),
        (format!("localhost:{}", addr.port()), true),
        (format!("127.0.0.1:{}", addr.port()), true),
        (addr.to_string(), true),
    ] {
        let answer = http(addr, "/metrics", &format!("Host: {host}\r\n{bearer}"));
        let want = if allowed { "HTTP/1.1 200" } else { "HTTP/1.1 403" };
        assert!(answer.starts_with(want), "Host {host}: {answer}");
    }
    let page = http(addr, "/", "Host: evil.example\r\n");
    assert!(page.starts_with("HTTP/1.1 403"), "{page}");
}

#[test]
fn http_allow_host_names_more_hosts() {
    let served = serve_with("rules.toml", RULES, ManualClock::new(), |c: Config| {
        c.http(any_port()).http_allow_host("metrics.internal")
    });
    let addr = served.http();
    assert!(http(addr, "/metrics", "Host: metrics.internal:9090\r\n").starts_with("HTTP/1.1 200"));
    assert!(http(addr, "/metrics", "Host: evil.example\r\n").starts_with("HTTP/1.1 403"));
}

/// curl over TLS to the HTTP listener: `(exit code, body)`.
fn curl(
    served: &Served<ManualClock>,
    files: &Files,
    client_cert: bool,
    path: &str,
) -> (i32, String) {
    let port = served.http().port();
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "--cacert"]).arg(files.path("ca.pem"));
    cmd.args(["--resolve", &format!("localhost:{port}:127.0.0.1")]);
    cmd.args(["-H", &format!("Authorization: Bearer {SECRET}")]);
    if client_cert {
        cmd.arg("--cert").arg(files.path("client.pem")).arg("--key").arg(files.path("client.key"));
    }
    let out = cmd.arg(format!("https://localhost:{port}{path}")).output().expect("curl");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn http_serves_over_tls_with_client_certificates() {
    let files = Files::new();
    let served = serve(&files, true, true);
    let (code, body) = curl(&served, &files, true, "/metrics");
    assert_eq!(code, 0);
    assert!(body.contains("leakgate_rules_in_force 2"), "{body}");
    let (code, _) = curl(&served, &files, false, "/metrics");
    assert_ne!(code, 0, "no client certificate, no answer");
    // Plain HTTP on the TLS port gets nothing.
    let mut s = raw(served.http());
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"));
}

#[test]
fn the_page_asks_for_the_secret_in_a_real_browser() {
    let files = Files::new();
    let served = serve(&files, false, false);
    let mut s = raw(served.resp());
    exchange(&mut s, format!("AUTH {SECRET}\r\n").as_bytes(), "+OK\r\n");
    s.write_all(b"LG.CHECK message_send/alice 8\r\n").unwrap();
    assert!(read_reply(&mut s).starts_with("*5\r\n:0\r\n:2\r\n"));
    let mut browser = Chromium::open(&format!("http://{}/", served.http()));
    browser.wait_for("!document.getElementById('login').hidden");
    assert_eq!(
        browser.eval("document.getElementById('status').textContent"),
        "enter the service's secret to see its buckets"
    );
    browser.eval("document.getElementById('token').value = 'wrong'; document.querySelector('#login button').click()");
    browser.wait_for(
        "document.getElementById('status').textContent.startsWith('that secret was refused')",
    );
    browser.eval(&format!(
        "document.getElementById('token').value = '{SECRET}'; document.querySelector('#login button').click()"
    ));
    let rows = "[...document.querySelectorAll('#buckets tbody tr')].map(r => r.dataset.key)";
    browser.wait_for(&format!("{rows}.length === 1"));
    assert_eq!(browser.eval(rows), serde_json::json!(["message_send/alice"]));
    assert_eq!(browser.eval("document.getElementById('login').hidden"), true);
}

#[test]
fn a_bad_auth_file_or_certificate_stops_the_start_with_the_reason() {
    let files = Files::new();
    let start = |config: Config| {
        let runtime = support::runtime();
        runtime.block_on(leakgate_serve::start(config)).map(|_| ()).unwrap_err().to_string()
    };
    let rules = support::RulesFile::toml(RULES);
    let base = || Config::new(&rules.path).resp(any_port());
    let missing = start(base().auth_file("/no/such/secret"));
    assert!(missing.contains("/no/such/secret: cannot read it"), "{missing}");
    std::fs::write(files.path("empty"), "\n").unwrap();
    let empty = start(base().auth_file(files.path("empty")));
    assert!(empty.contains("it is empty"), "{empty}");
    let not_a_cert = start(base().tls(files.path("secret"), files.path("server.key")));
    assert!(not_a_cert.contains("no PEM certificate"), "{not_a_cert}");
    let no_key = start(base().tls(files.path("server.pem"), files.path("secret")));
    assert!(no_key.starts_with("TLS: ") && no_key.contains("secret"), "{no_key}");
    let ca_alone = start(base().tls_client_ca(files.path("ca.pem")));
    assert!(ca_alone.contains("needs --tls-cert"), "{ca_alone}");
    assert!(Path::new(&files.path("ca.pem")).exists());
}
