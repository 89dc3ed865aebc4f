//! A real axum server on 127.0.0.1 and a real hyper client, for the integration tests, and the
//! helpers they share (a held route, waiting for a condition).
#![allow(dead_code, unreachable_pub)]

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A server running `app` on an ephemeral port of 127.0.0.1, stopped when dropped.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves with `ConnectInfo<SocketAddr>`, as `per_ip` needs.
    pub async fn start(app: Router) -> Server {
        Self::start_with(app, true).await
    }

    /// Serves without `ConnectInfo`: the peer address is nowhere in the request.
    pub async fn start_without_connect_info(app: Router) -> Server {
        Self::start_with(app, false).await
    }

    async fn start_with(app: Router, connect_info: bool) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            if connect_info {
                let make = app.into_make_service_with_connect_info::<SocketAddr>();
                axum::serve(listener, make).with_graceful_shutdown(stopped).await.unwrap();
            } else {
                axum::serve(listener, app).with_graceful_shutdown(stopped).await.unwrap();
            }
        });
        Server { addr, stop: Some(stop), task: Some(task) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A hyper client whose connections come from `local` (any address of 127.0.0.0/8 works on
/// Linux's loopback).
pub fn client_from(local: &str) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(local.parse::<IpAddr>().unwrap()));
    HttpClient { inner: Client::builder(TokioExecutor::new()).build(connector) }
}

/// A hyper client on 127.0.0.1.
pub fn client() -> HttpClient {
    client_from("127.0.0.1")
}

#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpConnector, Empty<Bytes>>,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The one value of a header, as text; panics if absent or repeated.
    pub fn header(&self, name: &str) -> &str {
        let mut values = self.headers.get_all(name).iter();
        let value = values.next().unwrap_or_else(|| panic!("no {name} in {:?}", self.headers));
        assert!(values.next().is_none(), "{name} repeated in {:?}", self.headers);
        value.to_str().unwrap()
    }

    /// Every value of a header, as text.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers.get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
}

impl HttpClient {
    pub async fn get(&self, url: &str) -> Reply {
        self.get_with(url, &[]).await
    }

    /// GET with extra headers, given as raw bytes (so tests can send non-UTF-8 values).
    pub async fn get_with(&self, url: &str, headers: &[(&str, &[u8])]) -> Reply {
        let mut request = Request::get(url);
        for (name, value) in headers {
            request = request.header(*name, http::HeaderValue::from_bytes(value).unwrap());
        }
        let response = self.inner.request(request.body(Empty::new()).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Reply { status: parts.status, headers: parts.headers, body }
    }
}

/// Counts the calls that reach a handler.
#[derive(Clone, Default)]
pub struct Calls(Arc<AtomicUsize>);

impl Calls {
    pub fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A router whose routes `paths` answer "ok" and count their calls.
pub fn counting_router(paths: &[&str], calls: &Calls) -> Router {
    let mut router = Router::new();
    for path in paths {
        let calls = calls.clone();
        router = router.route(
            path,
            axum::routing::get(move || {
                let calls = calls.clone();
                async move {
                    calls.hit();
                    "ok"
                }
            }),
        );
    }
    router
}

/// Parses a RateLimit or RateLimit-Policy value with sfv: (name, [(param, integer)]).
pub fn parse_list(value: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let list = sfv::Parser::new(value).parse_list().unwrap();
    list.into_iter()
        .map(|entry| match entry {
            sfv::ListEntry::Item(item) => {
                let name = item.bare_item.as_string().unwrap().as_str().to_owned();
                let params = item
                    .params
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), i64::from(v.as_integer().unwrap())))
                    .collect();
                (name, params)
            }
            sfv::ListEntry::InnerList(_) => panic!("an inner list in {value}"),
        })
        .collect()
}

/// A route whose handler waits for a pass from `gate` before it answers.
pub fn held_route(gate: Arc<tokio::sync::Semaphore>) -> Router {
    Router::new().route(
        "/",
        axum::routing::get(move || {
            let gate = gate.clone();
            async move {
                gate.acquire().await.unwrap().forget();
                "done"
            }
        }),
    )
}

/// Waits for `cond`, failing the test rather than hanging if it never comes.
pub async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("the condition never came");
}
