//! What the workspace's tests, benchmarks and examples share, so that each exists once:
//!
//! - [`watchdog`]: a process that dies with the test process, however that ends (a panic, an
//!   `exit`, `SIGKILL`), and takes its server and folder with it;
//! - [`redis`]: a real `redis-server` per test ([`RedisServer`]); [`cluster`]: six of them as
//!   a Redis Cluster ([`Cluster`]);
//! - [`postgres`]: a real PostgreSQL server per test binary ([`Postgres`]);
//! - `chromium` (feature `chromium`): a headless browser driven over the DevTools protocol;
//! - [`ports`]: a free loopback port;
//! - [`rng`]: a small seeded generator, so that a failure repeats;
//! - [`exact`]: exact rational nanoseconds, for the reference models of property tests.
//!
//! A crate takes it as a dev-dependency only (`leakgate-test-support.workspace = true` under
//! `[dev-dependencies]`); it depends on no crate of the workspace, so that the core can use it
//! too without two copies of its own types.
//!
//! ```
//! let server = leakgate_test_support::RedisServer::start();
//! assert!(server.url().starts_with("redis://127.0.0.1:"));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "chromium")]
pub mod chromium;
pub mod cluster;
pub mod exact;
pub mod ports;
pub mod postgres;
pub mod redis;
pub mod rng;
pub mod watchdog;

pub use cluster::Cluster;
pub use ports::free_port;
pub use postgres::Postgres;
pub use redis::RedisServer;
pub use rng::Rng;
