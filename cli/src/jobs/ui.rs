//! `leakgate jobs ui`: the dashboard's listener. Connections are served with hyper (axum's own
//! `serve` has no header timeout): at most [`MAX_CONNECTIONS`] at once (one more is closed at
//! once), a request's header must arrive within [`HEADER_TIMEOUT`] (which also closes a
//! kept-alive connection idle that long), and no connection lives longer than [`LIFETIME`]. The
//! routes and the token check are in [`super::ui_api`].

use super::{fail, open, DbArg};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections served at once; the page needs one or two, a script a few.
const MAX_CONNECTIONS: usize = 64;
/// How long a request's header may take to arrive, and a kept-alive connection may sit idle.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one connection is served (a browser opens another).
const LIFETIME: Duration = Duration::from_secs(120);
/// The environment variable that may hold the token instead of `--token-file`.
const TOKEN_ENV: &str = "LEAKGATE_JOBS_UI_TOKEN";

const LONG_HELP: &str = "\
GET / is the page: it asks for the token (kept in the tab only) and shows every lane with its
quota, its starts per second over the last minute against the quota, its waiting,
running, dead and cancelled jobs, whether it is paused, how long its oldest job has waited and
when its next slot is; a chosen lane's starts in each of the last 60 seconds and the lateness of
its latest runs; and the oldest dead jobs with their last error and the start of their
payload. Its buttons requeue a dead job, cancel a job and pause or resume a lane.

The API (every call needs `Authorization: Bearer TOKEN`, else 401):
  GET  /api/status                 the lanes, as `leakgate jobs status --json` (at most 500)
  GET  /api/dead?lane=L&limit=N    dead jobs, oldest first (N at most 100, default 50)
  GET  /api/runs?lane=L            its latest 2000 runs: [seconds ago, seconds late], and lateness_s
  POST /api/requeue?id=N           put a dead job back           -> {\"count\": n}
  POST /api/cancel?id=N            cancel a job                  -> {\"count\": n}
  POST /api/pause?lane=L           pause a lane;  /api/resume?lane=L resumes it
A refused call answers 4xx with {\"error\": \"why\"}. Request bodies are never read (over 4 KiB: 413).

The token is the first line of --token-file, else $LEAKGATE_JOBS_UI_TOKEN; it must be 16 bytes or
more. Only a loopback ADDR is accepted unless --public is given (then put TLS in front of it).
Once listening, `http ADDR` (the bound address) goes to stdout.";

/// The arguments of `leakgate jobs ui`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArg,
    /// Where to listen (port 0: any free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8089")]
    http: SocketAddr,
    /// A file whose first line is the token (else $LEAKGATE_JOBS_UI_TOKEN)
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Accept an ADDR that is not loopback
    #[arg(long)]
    public: bool,
}

/// The token: the first line of `file`, else the environment's; 16 bytes or more.
fn token(file: Option<&PathBuf>) -> Result<String, String> {
    let token = match file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        None => std::env::var(TOKEN_ENV)
            .map_err(|_| format!("no token: give --token-file FILE or set {TOKEN_ENV}"))?
            .trim()
            .to_string(),
    };
    if token.len() < 16 {
        return Err("the token is shorter than 16 bytes".into());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token must be printable ASCII without spaces".into());
    }
    Ok(token)
}

/// Runs `leakgate jobs ui` until it is killed.
pub(crate) fn run(args: Args) -> ExitCode {
    let token = match token(args.token_file.as_ref()) {
        Ok(t) => t,
        Err(e) => return fail("ui", &e),
    };
    if !args.public && !args.http.ip().is_loopback() {
        return fail(
            "ui",
            &format!("{} is not a loopback address (give --public to serve it anyway)", args.http),
        );
    }
    super::block_on("ui", async move {
        let queue = open(&args.db.db).await?;
        let listener = TcpListener::bind(args.http)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.http))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        crate::out::outln!("http {bound}");
        let app = super::ui_api::router(queue, token);
        serve(listener, app).await;
        Ok(())
    })
}

/// Accepts connections for ever, each served as the module says.
async fn serve(listener: TcpListener, app: axum::Router) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or the like: wait rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT).keep_alive(true);
            let served = builder.serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(LIFETIME, served).await;
            drop(slot);
        });
    }
}
