//! `leakgate serve`: the rate-limit service (the library `leakgate-serve`) from the shell.

use crate::duration::parse_duration;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const LONG_HELP: &str = "\
Listeners (each served when its flag is given):
  --grpc ADDR   Envoy's rate-limit service (envoy.service.ratelimit.v3.RateLimitService):
                a descriptor (k1, v1), (k2, v2) in domain D is the key D/k1/v1/k2/v2
  --resp ADDR   the Redis protocol: redis-cell's CL.THROTTLE key max_burst count period
                [quantity], and LG.CHECK key [cost] / LG.CHECKALL cost key... / LG.RULE key
                on the rules file
  --http ADDR   GET /metrics (Prometheus), GET /buckets?prefix=P&min_fill=F&limit=N&cursor=C
                (JSON, a page at a time), and GET / (a page of the buckets to filter and sort)

The rules file is leakgate's TOML (see `leakgate rules --help`), or envoyproxy/ratelimit's YAML
configuration when it is named .yaml or .yml. It is read again on SIGHUP and when it changes;
every key keeps the units it could admit (capped at the new burst), and a file that does not parse is refused (the reason is logged) while
the rules in force stay. With --redis, the buckets live in that Redis and every instance on it
shares them (--redis-cluster URL[,URL...]: in a Redis Cluster, any of its nodes named); rules
pushed with `leakgate rules push` are picked up within a second.

Connections (every listener): at most --max-connections open at once per listener (one more is
told so and closed), fitted below the open-files limit, whose soft value is raised to the hard one
at start; a request (an HTTP header, a RESP command, a TLS handshake, HTTP/2's preface) must
arrive whole within --header-timeout, and a reply be taken within it; a RESP or gRPC connection
that sends nothing for --idle-timeout is closed (an HTTP one waiting for its next request, after
--header-timeout).

Authentication (opt-in): --auth-file FILE, or the file LEAKGATE_AUTH_FILE names, holds one
secret (never on the command line). RESP clients then send AUTH <secret> (redis-cli -a, or a
redis://:<secret>@host URL), gRPC clients the metadata authorization: Bearer <secret>, HTTP
clients the header Authorization: Bearer <secret> (/metrics and /buckets; the page asks for it).
--tls-cert and --tls-key put gRPC and HTTP behind TLS; --tls-client-ca also asks gRPC and HTTP
clients for a certificate signed by that CA. The HTTP listener answers only requests whose Host is
an IP address, localhost, or a name given with --http-allow-host (against DNS rebinding).

Logs go to stderr: warnings, and what the service puts in force (each rules file applied: its
rules count, length and hash); LEAKGATE_LOG=info (or debug, or a tracing filter such as
leakgate_serve=debug) says more. A changed rules file is applied once two polls in a row read
the same file (so never half a file being written), and never when empty (0 bytes); a file with
only a comment lifts every limit.

Memory: the keys clients make (CL.THROTTLE keys, the buckets of Envoy descriptor overrides) take
at most --key-memory together (256MiB by default; each key its bytes and about 160 more); a new
key past it is refused as by a full bucket, until idle buckets are swept (every second). Keys are
at most 4 KiB; a MULTI queues at most 1 MiB. SIGTERM or SIGINT stops gracefully: no new connection,
calls in flight are answered.

Once listening, one line per listener goes to stdout: `grpc 127.0.0.1:8081`, ... (the bound
port, also when ADDR asked for port 0).

Exit status: 0 after a graceful stop, 1 when the service cannot start (a bad rules file, a port
in use, Redis unreachable), 2 for a usage error.";

/// The arguments of `leakgate serve`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    /// The rules file (TOML, or Envoy's YAML for .yaml/.yml)
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
    /// Serve Envoy's rate-limit API over gRPC on ADDR (e.g. 127.0.0.1:8081)
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    grpc: Option<SocketAddr>,
    /// Serve the Redis protocol (CL.THROTTLE, LG.CHECK) on ADDR (e.g. 127.0.0.1:6380)
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    resp: Option<SocketAddr>,
    /// Serve /metrics, /buckets and the page on ADDR (e.g. 127.0.0.1:9090)
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    http: Option<SocketAddr>,
    /// Keep the buckets in this Redis, shared by every instance (redis://host:port/db)
    #[arg(long, value_name = "URL", group = "redis_any")]
    redis: Option<String>,
    /// Or keep them in this Redis Cluster: the URLs of any of its nodes, comma-separated
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',', group = "redis_any")]
    redis_cluster: Vec<String>,
    /// With --redis: the longest a check waits for Redis before the failure policy (refuse)
    /// answers
    #[arg(long, value_name = "D", value_parser = parse_duration, requires = "redis_any")]
    redis_deadline: Option<Duration>,
    /// With --redis: what a check answers when Redis gives none in time: deny (never above the
    /// limit), allow, or local=N (a bucket here at 1/N of each quota, for a fleet of N)
    #[arg(long, value_name = "POLICY", value_parser = parse_policy, default_value = "deny", requires = "redis_any")]
    redis_failure: leakgate_redis::FailurePolicy,
    /// Add the IETF RateLimit, RateLimit-Policy (and Retry-After) fields to gRPC answers'
    /// response_headers_to_add
    #[arg(long)]
    rate_limit_headers: bool,
    /// How often the rules file is read to see whether it changed (0: only on SIGHUP); a change
    /// is applied once two polls in a row read the same file
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "500ms")]
    poll: Duration,
    /// The most connections each listener keeps open at once (lowered to fit the open-files
    /// limit)
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_connections: usize,
    /// The longest a client may take to send a whole request, or to take a reply
    #[arg(long, value_name = "D", value_parser = parse_positive, default_value = "10s")]
    header_timeout: Duration,
    /// How long a RESP or gRPC connection may send nothing before it is closed (0: never)
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "300s")]
    idle_timeout: Duration,
    /// Ask every client for the secret in FILE (default: the file LEAKGATE_AUTH_FILE names)
    #[arg(long, value_name = "FILE")]
    auth_file: Option<PathBuf>,
    /// Serve gRPC and HTTP over TLS with this certificate chain (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With --tls-cert: only let in gRPC and HTTP clients with a certificate this CA signed
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// A Host name the HTTP listener answers besides IP addresses and localhost (repeatable;
    /// * for any)
    #[arg(long, value_name = "NAME")]
    http_allow_host: Vec<String>,
    /// The most memory the keys clients make (CL.THROTTLE keys, descriptor overrides) may take
    /// together; a new key past it is refused (e.g. 64MiB, 1GiB, or bytes)
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256MiB")]
    key_memory: usize,
}

fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err("must be more than zero".into()),
        d => Ok(d),
    }
}

/// `--auth-file`, else the file `LEAKGATE_AUTH_FILE` names (set but empty is an error).
fn auth_file(flag: Option<PathBuf>) -> Result<Option<PathBuf>, String> {
    if flag.is_some() {
        return Ok(flag);
    }
    match std::env::var_os("LEAKGATE_AUTH_FILE") {
        Some(path) if path.is_empty() => Err("LEAKGATE_AUTH_FILE is set but empty".into()),
        path => Ok(path.map(PathBuf::from)),
    }
}

/// `N`, `NKiB`, `NMiB` or `NGiB` (also `K`, `M`, `G`, `KB`, `MB`, `GB`: powers of 1,024 all),
/// at least 1 MiB.
fn parse_size(text: &str) -> Result<usize, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?} is not a size: e.g. 256MiB, 1GiB or 100000000")),
    };
    let n: usize = number.parse().map_err(|_| format!("{text:?} is not a size: e.g. 256MiB"))?;
    let bytes = n.checked_mul(1 << shift).ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes < 1 << 20 {
        return Err(format!("{text:?} is less than 1MiB: too little for the keys of one client"));
    }
    Ok(bytes)
}

fn parse_policy(text: &str) -> Result<leakgate_redis::FailurePolicy, String> {
    use leakgate_redis::FailurePolicy;
    match text.split_once('=') {
        None if text == "deny" => Ok(FailurePolicy::Deny),
        None if text == "allow" => Ok(FailurePolicy::Allow),
        Some(("local", n)) => match n.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(FailurePolicy::Local { expected_servers: n }),
            _ => Err(format!("{n:?} is not a number of servers (1 or more)")),
        },
        _ => Err(format!("{text:?} is not a policy: deny, allow, or local=N")),
    }
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.to_socket_addrs()
        .map_err(|e| format!("{text:?} is not an address ({e}); e.g. 127.0.0.1:8081"))?
        .next()
        .ok_or_else(|| format!("{text:?} names no address"))
}

/// Runs `leakgate serve`.
pub(crate) fn run(args: Args) -> ExitCode {
    // The service's own notes (the rules it put in force, and from where) and everyone's
    // warnings.
    let filter = tracing_subscriber::EnvFilter::try_from_env("LEAKGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,leakgate_serve=info"));
    // Colours only for a person at a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
    let mut config = leakgate_serve::Config::new(&args.rules)
        .rate_limit_headers(args.rate_limit_headers)
        .watch_every(args.poll)
        .max_connections(args.max_connections)
        .header_timeout(args.header_timeout)
        .idle_timeout(args.idle_timeout)
        .key_memory(args.key_memory);
    match auth_file(args.auth_file) {
        Ok(Some(path)) => config = config.auth_file(path),
        Ok(None) => {}
        Err(e) => {
            crate::out::errln!("leakgate serve: {e}");
            return ExitCode::from(1);
        }
    }
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config = config.tls(cert, key);
    }
    if let Some(ca) = args.tls_client_ca {
        config = config.tls_client_ca(ca);
    }
    for host in args.http_allow_host {
        config = config.http_allow_host(host);
    }
    // As Redis does: as many descriptors as the hard limit allows; the caps fit what we get.
    if let Err(e) = leakgate_serve::raise_open_files_limit() {
        crate::out::errln!("leakgate serve: cannot raise the open-files limit: {e}");
    }
    if let Some(addr) = args.grpc {
        config = config.grpc(addr);
    }
    if let Some(addr) = args.resp {
        config = config.resp(addr);
    }
    if let Some(addr) = args.http {
        config = config.http(addr);
    }
    if let Some(url) = &args.redis {
        config = config.redis(url.clone());
    }
    if !args.redis_cluster.is_empty() {
        config = config.redis_cluster(args.redis_cluster.clone());
    }
    config = config.redis_failure_policy(args.redis_failure);
    if let Some(deadline) = args.redis_deadline {
        config = config.redis_deadline(deadline);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            crate::out::errln!("leakgate serve: cannot start a runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        // Before the addresses are announced: a signal sent right after must find its handler.
        let signals = match leakgate_serve::Signals::install() {
            Ok(signals) => signals,
            Err(e) => {
                crate::out::errln!("leakgate serve: cannot catch signals: {e}");
                return ExitCode::from(1);
            }
        };
        let running = match leakgate_serve::start(config).await {
            Ok(running) => running,
            Err(e) => {
                crate::out::errln!("leakgate serve: {e}");
                return ExitCode::from(1);
            }
        };
        let listeners = [
            ("grpc", running.grpc_addr()),
            ("resp", running.resp_addr()),
            ("http", running.http_addr()),
        ];
        let mut announced = String::new();
        for (name, addr) in listeners {
            if let Some(addr) = addr {
                announced.push_str(&format!("{name} {addr}\n"));
            }
        }
        // A closed stdout must not stop the service.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), announced.as_bytes());
        let _ = std::io::Write::flush(&mut std::io::stdout());
        running.run_until(signals).await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_in_powers_of_1024() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        for bad in ["", "MiB", "12 parsecs", "-1MiB", "1.5GiB", "1KiB", "99999999999999999999GiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
