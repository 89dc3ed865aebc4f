//! Headless Chromium (Debian package `chromium`, see `scripts/ensure-serve-tools.sh`), driven
//! over the DevTools protocol: load a page, run JavaScript in it, take a screenshot. The browser
//! runs in a session of its own under a [`watchdog`](crate::watchdog), which kills its whole
//! process group and removes its profile when the [`Chromium`] is dropped or the test process
//! ends in any way.
//!
//! ```
//! let mut browser = leakgate_test_support::chromium::Chromium::open("about:blank");
//! assert_eq!(browser.eval("1 + 2"), serde_json::json!(3));
//! ```

use crate::watchdog::{has_exited, Program, Watched};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// A browser with one tab open, attached to over DevTools.
///
/// ```no_run
/// let mut browser = leakgate_test_support::chromium::Chromium::open("about:blank");
/// browser.wait_for("document.readyState === 'complete'");
/// ```
pub struct Chromium {
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    /// Declared after the socket: the browser goes after its connection.
    _browser: Watched,
}

impl std::fmt::Debug for Chromium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chromium").field("session", &self.session).finish_non_exhaustive()
    }
}

fn binary() -> &'static str {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if std::path::Path::new(candidate).exists() {
            return candidate;
        }
    }
    "chromium"
}

impl Chromium {
    /// Starts a browser and opens `url` in a tab (panics, naming
    /// `scripts/ensure-serve-tools.sh`, when there is no browser).
    ///
    /// ```no_run
    /// let _ = leakgate_test_support::chromium::Chromium::open("about:blank");
    /// ```
    pub fn open(url: &str) -> Chromium {
        let profile = tempfile::tempdir().expect("a temporary folder").keep();
        // Chromium's own temporary files (its singleton socket's folder, which a killed browser
        // leaves behind) go inside the profile, and so with it.
        let tmp = profile.join("tmp");
        std::fs::create_dir(&tmp).expect("a folder in the profile");
        let browser = Watched::start(
            Program::new("env")
                .remove(&profile)
                .arg(format!("TMPDIR={}", tmp.display()))
                .arg(binary())
                .args([
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                ])
                .args(["--no-first-run", "--no-default-browser-check", "--window-size=1200,800"])
                .arg("--remote-debugging-port=0")
                .arg(format!("--user-data-dir={}", profile.display()))
                .arg("about:blank"),
        );
        // Chromium writes "PORT\n/devtools/browser/ID" there once it listens.
        let active = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let ws = loop {
            if let Ok(text) = std::fs::read_to_string(&active) {
                if let Some((port, path)) = text.split_once('\n') {
                    if !path.trim().is_empty() {
                        break format!("ws://127.0.0.1:{}{}", port.trim(), path.trim());
                    }
                }
            }
            assert!(
                !has_exited(browser.pid()),
                "cannot run chromium: see scripts/ensure-serve-tools.sh"
            );
            assert!(Instant::now() < deadline, "chromium did not open DevTools within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        let (socket, _) = tungstenite::connect(ws.as_str()).expect("the DevTools socket");
        let mut browser =
            Chromium { socket, session: String::new(), next_id: 1, _browser: browser };
        let target = browser.call(None, "Target.createTarget", json!({ "url": url }));
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let attached = browser.call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// Sends one DevTools command and waits for its result.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket.send(Message::text(message.to_string())).expect("send to chromium");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "chromium did not answer {method}");
            let Message::Text(text) = self.socket.read().expect("read from chromium") else {
                continue;
            };
            let reply: Value = serde_json::from_str(&text).unwrap();
            if reply["id"] == json!(id) {
                if let Some(error) = reply.get("error") {
                    panic!("{method}: {error}");
                }
                return reply["result"].clone();
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise) and returns its value.
    ///
    /// ```no_run
    /// let mut browser = leakgate_test_support::chromium::Chromium::open("about:blank");
    /// assert_eq!(browser.eval("Promise.resolve('x')"), serde_json::json!("x"));
    /// ```
    pub fn eval(&mut self, expression: &str) -> Value {
        let session = self.session.clone();
        let params =
            json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let result = self.call(Some(&session), "Runtime.evaluate", params);
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// Waits until `condition` (a JavaScript expression) is true in the page (20 s at most).
    ///
    /// ```no_run
    /// let mut browser = leakgate_test_support::chromium::Chromium::open("about:blank");
    /// browser.wait_for("document.body");
    /// ```
    pub fn wait_for(&mut self, condition: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        // Until the page has loaded, the condition may throw (no body yet): that is "not yet".
        let probe = format!(
            "(() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})()"
        );
        while self.eval(&probe) != json!(true) {
            assert!(Instant::now() < deadline, "the page never satisfied: {condition}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A PNG of the page as it is.
    ///
    /// ```no_run
    /// let mut browser = leakgate_test_support::chromium::Chromium::open("about:blank");
    /// assert!(browser.screenshot().starts_with(b"\x89PNG"));
    /// ```
    pub fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine as _;
        let session = self.session.clone();
        let shot = self.call(Some(&session), "Page.captureScreenshot", json!({ "format": "png" }));
        base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap()
    }
}
