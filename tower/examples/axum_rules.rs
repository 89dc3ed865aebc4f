//! A runnable axum server limited by a rules file: routes, one client's override and a route
//! with two quotas, reloaded when the file changes, with an operator view on its own port.
//!
//! ```sh
//! cargo run -p leakgate-tower --example axum_rules                  # built-in rules, :3000
//! cargo run -p leakgate-tower --example axum_rules -- rules.toml 127.0.0.1:8080
//! curl -i http://127.0.0.1:3000/search     # "http/search#0" and "http/search#1" announced
//! curl -s http://127.0.0.1:3001/ratelimit  # rules in force, their counts, the fullest buckets
//! ```
//!
//! Keys are `http{route}/{ip}` (`http/search/127.0.0.1`), limited by the rule of their longest
//! configured prefix. Edit the file while the server runs: it is read again every second, and
//! a file that does not parse is reported and leaves the rules in force.

use axum::{routing::get, Router};
use leakgate::Rules;
use leakgate_tower::{KeyTemplate, LiveRules, RateLimitLayer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The rules used when no file is named (and written to the file when it does not exist).
const EXAMPLE_RULES: &str = r#"# leakgate rules: key paths and their quotas (longest prefix wins)
"" = "20/s burst 40"                      # every other key
"http/search" = ["2/s burst 5", "100/h"]  # each client on /search: both must conform
"http/search/127.0.0.2" = "50/s"          # one client's own limit on /search
"http/users" = { quota = "5/s", shadow = true }  # counted, never refused (yet)
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args.next();
    let addr: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:3000").parse()?;
    let rules = match &file {
        Some(path) if std::path::Path::new(path).exists() => Rules::from_file(path)?,
        Some(path) => {
            std::fs::write(path, EXAMPLE_RULES)?;
            Rules::from_toml(EXAMPLE_RULES)?
        }
        None => Rules::from_toml(EXAMPLE_RULES)?,
    };

    let live = Arc::new(LiveRules::new(rules));
    let layer = RateLimitLayer::rules(live.clone(), KeyTemplate::parse("http{route}/{ip}")?)
        .problem_details(true);
    let app = Router::new()
        .route("/search", get(|| async { "results\n" }))
        .route(
            "/users/{id}",
            get(|axum::extract::Path(id): axum::extract::Path<u32>| async move {
                format!("user {id}\n")
            }),
        )
        .route("/", get(|| async { "hello\n" }))
        .layer(layer.clone());
    // The operator view on the next port, which only the machine itself can reach.
    let admin = Router::new().route_service("/ratelimit", layer.operator_view());
    let admin_addr = SocketAddr::new([127, 0, 0, 1].into(), addr.port().wrapping_add(1));

    if let Some(path) = file {
        tokio::spawn(reload_on_change(live.clone(), path));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let admin_listener = tokio::net::TcpListener::bind(admin_addr).await?;
    println!("serving http://{addr}/ under {} rules", live.rules().len());
    println!("operator view: http://{admin_addr}/ratelimit");
    let admin = tokio::spawn(async move { axum::serve(admin_listener, admin).await });
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    admin.await??;
    Ok(())
}

/// Reads `path` every second and puts its rules in force when its bytes change: every key keeps
/// its level, and responses announce the new rules at once.
async fn reload_on_change(live: Arc<LiveRules>, path: String) {
    let mut last = std::fs::read(&path).ok();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = std::fs::read(&path).ok();
        if now == last {
            continue;
        }
        last = now;
        match Rules::from_file(&path) {
            Ok(rules) => {
                let count = rules.len();
                // A reload hands every tracked key over: off the async workers.
                let live = live.clone();
                let _ = tokio::task::spawn_blocking(move || live.reload(rules)).await;
                println!("{path}: {count} rules in force");
            }
            Err(error) => println!("{path}: kept the rules in force: {error}"),
        }
    }
}
