//! `leakgate jobs ui` as a user runs it, on a real SQLite file: the API over real HTTP (401
//! without the token, the counts, the actions read back from the database, bad requests refused),
//! the same on PostgreSQL, a hostile client, refusals at start, and the page in headless Chromium (the lanes and counts
//! in the DOM, a payload that is HTML shown as text, the pause button's effect in the database).

mod common;

use common::{leakgate, text};
use leakgate_jobs::{Jobs, LaneRules, LaneStatus};
use leakgate_test_support::chromium::Chromium;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "correct-horse-battery-staple";
/// A payload that would run script if the page put it in the DOM as HTML.
const EVIL: &str = "<img src=x onerror=\"document.title='pwned'\"><b>bold</b>";

/// `leakgate jobs ui` on `db`, killed when dropped.
struct Ui {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, db: &str) -> Ui {
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut child = leakgate()
        .args(["jobs", "ui", "--db", db, "--http", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("http ").unwrap_or_else(|| panic!("no address: {line:?}"));
    Ui { addr: addr.parse().unwrap(), child }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Two lanes: `refunds/bank-a` (paced 1/s: of its three jobs one is
/// taken and running, two wait) and `mail` (one dead job whose
/// payload and error are HTML). Returns the dead job's id and a waiting job's id.
fn fill(db: &str) -> (i64, i64) {
    runtime().block_on(async {
        let jobs = Jobs::builder(db).max_attempts(1).open().await.unwrap();
        jobs.set_rules(&LaneRules::from_toml("\"refunds\" = \"1/s\"").unwrap()).await.unwrap();
        let mut refunds = Vec::new();
        for payload in ["r1", "r2", "r3"] {
            refunds.push(jobs.add("refunds/bank-a", payload).await.unwrap());
        }
        let dead = jobs.add("mail", EVIL).await.unwrap();
        // The pace lets one refund be taken now (it stays running); the mail job dies.
        let taken = jobs.take(10).await.unwrap();
        let job = taken.iter().find(|j| j.id() == dead).unwrap();
        jobs.fail(job, "<script>document.title='pwned'</script>").await.unwrap();
        let waiting = refunds.into_iter().find(|id| taken.iter().all(|j| j.id() != *id)).unwrap();
        (dead, waiting)
    })
}

fn lane(db: &str, name: &str) -> LaneStatus {
    runtime().block_on(async {
        let jobs = Jobs::open(db).await.unwrap();
        jobs.status().await.unwrap().into_iter().find(|l| l.lane == name).unwrap()
    })
}

/// One request on a connection of its own: (status, head, body).
fn http(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn json(addr: SocketAddr, method: &str, path: &str) -> (u16, Value) {
    let (status, head, body) = http(addr, method, path, Some(TOKEN));
    assert!(head.contains("content-type: application/json"), "{head}");
    (status, serde_json::from_str(&body).unwrap())
}

#[test]
fn the_api_needs_the_token_and_acts_on_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    let (dead, waiting) = fill(&db);
    let ui = start(dir.path(), &db);

    // The page holds no data and is served to anyone; every API call needs the token.
    let (status, head, page) = http(ui.addr, "GET", "/", None);
    assert_eq!(status, 200);
    assert!(
        head.contains("x-content-type-options: nosniff")
            && head.contains("content-security-policy")
    );
    assert!(page.contains("<title>leakgate jobs</title>"));
    for (method, path) in [
        ("GET", "/api/status"),
        ("GET", "/api/dead"),
        ("GET", "/api/runs?lane=mail"),
        ("POST", "/api/requeue?id=1"),
        ("POST", "/api/cancel?id=1"),
        ("POST", "/api/pause?lane=mail"),
        ("POST", "/api/resume?lane=mail"),
    ] {
        for token in [None, Some("wrong"), Some("correct-horse-battery-stapl"), Some("")] {
            let (status, head, _) = http(ui.addr, method, path, token);
            assert_eq!(status, 401, "{method} {path} with {token:?}");
            assert!(head.contains("www-authenticate: bearer"));
        }
    }
    assert!(!lane(&db, "mail").paused, "a refused pause changed nothing");

    // The lanes and their counts, as `jobs status --json`.
    let (status, doc) = json(ui.addr, "GET", "/api/status");
    assert_eq!(status, 200);
    let refunds = &doc["lanes"]["refunds/bank-a"];
    assert_eq!((refunds["waiting"].as_u64(), refunds["running"].as_u64()), (Some(2), Some(1)));
    assert_eq!(refunds["rule"], "\"refunds\" = 1/s");
    assert_eq!(refunds["rule_per_minute"].as_f64(), Some(60.0));
    assert_eq!(doc["lanes"]["mail"]["dead"].as_u64(), Some(1));
    assert_eq!(doc["lanes_left_out"].as_u64(), Some(0));

    // The dead job, its payload and error as they are (JSON-escaped, never interpreted).
    let (_, doc) = json(ui.addr, "GET", "/api/dead?limit=1000");
    assert_eq!(doc["dead"].as_array().unwrap().len(), 1);
    assert_eq!(doc["dead"][0]["id"].as_i64(), Some(dead));
    assert_eq!(doc["dead"][0]["payload_preview"], EVIL);
    assert_eq!(doc["dead"][0]["error"], "<script>document.title='pwned'</script>");

    // A lane's latest runs for the chart: the one refund run, started moments ago.
    let (_, doc) = json(ui.addr, "GET", "/api/runs?lane=refunds/bank-a");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{doc}");
    assert!(runs[0][0].as_f64().is_some_and(|ago| (0.0..60.0).contains(&ago)), "{doc}");
    assert_eq!(doc["lateness_s"]["max"], runs[0][1]);
    assert_eq!(json(ui.addr, "GET", "/api/runs").0, 400);
    assert_eq!(json(ui.addr, "GET", "/api/runs?lane=none").1["runs"], serde_json::json!([]));

    // The actions, read back from the database.
    assert_eq!(json(ui.addr, "POST", "/api/pause?lane=refunds/bank-a").0, 200);
    assert!(lane(&db, "refunds/bank-a").paused);
    assert_eq!(json(ui.addr, "POST", "/api/resume?lane=refunds%2Fbank-a").0, 200);
    assert!(!lane(&db, "refunds/bank-a").paused);
    assert_eq!(json(ui.addr, "POST", &format!("/api/requeue?id={dead}")).1["count"], 1);
    assert_eq!((lane(&db, "mail").dead, lane(&db, "mail").ready), (0, 1));
    assert_eq!(json(ui.addr, "POST", &format!("/api/cancel?id={waiting}")).1["count"], 1);
    assert_eq!(lane(&db, "refunds/bank-a").cancelled, 1);

    // Mistakes are refused with a reason, and change nothing.
    for (path, code) in [
        ("/api/cancel?id=999999", 404),
        ("/api/pause?lane=no-such-lane", 404),
        ("/api/cancel", 400),
        ("/api/cancel?id=x", 400),
        ("/api/pause", 400),
    ] {
        let (status, doc) = json(ui.addr, "POST", path);
        assert_eq!(status, code, "{path}: {doc}");
        assert!(doc["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}: {doc}");
    }
    assert_eq!(json(ui.addr, "GET", "/api/dead?limit=x").0, 400);
    assert_eq!(lane(&db, "refunds/bank-a").cancelled, 1);
}

/// The same API on PostgreSQL (the store layer is shared; this checks the wiring).
#[test]
fn the_api_works_on_postgres() {
    let pg = leakgate_test_support::postgres::Postgres::start();
    let db = pg.database();
    let dir = tempfile::tempdir().unwrap();
    let (dead, _) = fill(&db);
    let ui = start(dir.path(), &db);
    assert_eq!(http(ui.addr, "GET", "/api/status", None).0, 401);
    let (_, doc) = json(ui.addr, "GET", "/api/status");
    assert_eq!(doc["backend"], "PostgreSQL");
    assert_eq!(doc["lanes"]["mail"]["dead"].as_u64(), Some(1));
    assert_eq!(json(ui.addr, "GET", "/api/dead").1["dead"][0]["id"].as_i64(), Some(dead));
    assert_eq!(
        json(ui.addr, "GET", "/api/runs?lane=mail").1["runs"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(json(ui.addr, "POST", "/api/pause?lane=mail").0, 200);
    assert!(lane(&db, "mail").paused);
}

#[test]
fn hostile_clients_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    fill(&db);
    let ui = start(dir.path(), &db);

    // A body is never read: one announced over 4 KiB is refused before the token is checked.
    let mut s = TcpStream::connect(ui.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "POST /api/pause?lane=mail HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100000000\r\n\r\n").unwrap();
    let mut reply = [0u8; 12];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.1 413");
    assert!(!lane(&db, "mail").paused);

    // A header that never ends: the connection is closed (after the 10 s header timeout).
    let mut slow = TcpStream::connect(ui.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    slow.write_all(b"GET /api/status HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(started.elapsed() < Duration::from_secs(60), "a stalled header was never cut off");
    assert!(!text(&rest).contains("\"lanes\""), "{}", text(&rest));

    // The service still answers.
    assert_eq!(http(ui.addr, "GET", "/api/status", Some(TOKEN)).0, 200);
}

#[test]
fn it_refuses_to_start_without_a_token_or_on_a_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let good = dir.path().join("good");
    std::fs::write(&good, TOKEN).unwrap();
    let cases: [(Vec<&str>, &str); 4] = [
        (vec![], "no token"),
        (vec!["--token-file", short.to_str().unwrap()], "shorter than 16 bytes"),
        (vec!["--token-file", "/nonexistent/token"], "cannot read the token file"),
        (vec!["--token-file", good.to_str().unwrap(), "--http", "0.0.0.0:0"], "not a loopback"),
    ];
    for (extra, why) in cases {
        let out = leakgate()
            .args(["jobs", "ui", "--db", &db])
            .args(&extra)
            .env_remove("LEAKGATE_JOBS_UI_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(text(&out.stderr).contains(why), "{extra:?}: {}", text(&out.stderr));
    }
    assert!(!Path::new(&db).exists(), "a refused start wrote nothing");
}

#[test]
fn the_page_lists_the_lanes_and_pauses_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    let (dead, _) = fill(&db);
    let ui = start(dir.path(), &db);
    let mut browser = Chromium::open(&format!("http://{}/", ui.addr));

    // Without the token the page shows only the form; with it, the board.
    browser.wait_for("document.getElementById('token')");
    assert_eq!(browser.eval("document.getElementById('board').hidden"), true);
    browser.eval(&format!(
        "document.getElementById('token').value = '{TOKEN}'; \
         document.getElementById('login').requestSubmit(); true"
    ));
    browser.wait_for("Number(document.body.dataset.refreshed) >= 1");
    let cell = |lane: &str, class: &str| {
        format!("document.querySelector('#lanes tr[data-lane=\"{lane}\"] td.{class}').textContent")
    };
    assert_eq!(browser.eval("document.querySelectorAll('#lanes tbody tr').length"), 2);
    assert_eq!(browser.eval(&cell("refunds/bank-a", "waiting")), "2");
    assert_eq!(browser.eval(&cell("refunds/bank-a", "running")), "1");
    assert_eq!(browser.eval(&cell("mail", "dead")), "1");
    assert_eq!(browser.eval(&cell("refunds/bank-a", "quota")), "\"refunds\" = 1/s");
    assert_eq!(browser.eval(&cell("mail", "quota")), "not paced");
    assert_eq!(browser.eval(&cell("refunds/bank-a", "state")), "running");

    // The chart: the chosen lane's starts in its last 60 seconds (one run each), the quota
    // drawn for the paced lane only.
    let starts = "[...document.querySelectorAll('#chart rect')].reduce((n, r) => n + Number(r.dataset.starts), 0)";
    assert_eq!(browser.eval("document.getElementById('chart-lane').value"), "mail");
    assert_eq!(browser.eval(starts), 1);
    assert_eq!(browser.eval("document.getElementById('quota-line') === null"), true);
    browser.eval(
        "const s = document.getElementById('chart-lane'); s.value = 'refunds/bank-a'; \
         s.dispatchEvent(new Event('change')); true",
    );
    browser.wait_for("document.getElementById('quota-line') !== null");
    assert_eq!(browser.eval(starts), 1);
    assert!(browser
        .eval("document.getElementById('lateness').textContent")
        .as_str()
        .unwrap()
        .starts_with("1 latest runs"));

    // The dead job's payload and error are text: no element was made of them, nothing ran.
    let row = format!("document.querySelector('#dead tr[data-id=\"{dead}\"]')");
    assert_eq!(browser.eval(&format!("{row}.querySelector('td.payload').textContent")), EVIL);
    assert_eq!(
        browser.eval("document.querySelectorAll('#dead img, #dead b, #dead script').length"),
        0
    );
    assert_eq!(browser.eval("document.title"), "leakgate jobs");

    // Pause the lane with its button; the database says so, and so does the page.
    browser.eval(
        "document.querySelector('#lanes button[data-action=\"pause\"][data-lane=\"refunds/bank-a\"]').click(); true",
    );
    browser.wait_for(&format!("{} === 'paused'", cell("refunds/bank-a", "state")));
    assert!(lane(&db, "refunds/bank-a").paused);
    assert!(!lane(&db, "mail").paused);

    let shots = tempfile::tempdir().unwrap();
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"));
    std::fs::write(shots.path().join("jobs-ui.png"), &png).unwrap();
}
