//! Headless Chromium (Debian package `chromium`), driven over the DevTools protocol: load a
//! page, run JavaScript in it, take a screenshot. The browser runs in a process group of its
//! own, killed when dropped.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

pub struct Chromium {
    child: Child,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
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
    /// Starts a browser and opens `url` in a tab.
    pub fn open(url: &str) -> Chromium {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary())
            .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            .args(["--no-first-run", "--no-default-browser-check", "--window-size=1200,800"])
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run chromium ({e}): see scripts/ensure-chromium.sh")
            });
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
        let stderr = child.stderr.take().unwrap();
        let (found, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = found.send(line[at..].trim().to_string());
                }
            }
        });
        let ws = heard.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| {
            let _ = kill_group(&mut child);
            panic!("chromium did not open its DevTools endpoint within 30 s")
        });
        let (socket, _) = tungstenite::connect(ws.as_str()).expect("the DevTools socket");
        let mut browser =
            Chromium { child, socket, session: String::new(), next_id: 1, _profile: profile };
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

    /// Waits until `condition` (a JavaScript expression) is true in the page.
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
    pub fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine as _;
        let session = self.session.clone();
        let shot = self.call(Some(&session), "Page.captureScreenshot", json!({ "format": "png" }));
        base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap()
    }
}

fn kill_group(child: &mut Child) -> std::io::Result<()> {
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
    child.wait().map(|_| ())
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = kill_group(&mut self.child);
    }
}
