//! `leakgate serve`: one exact rate-limit service for programs in any language.
//!
//! One process answers limit checks on a leakgate rules file, in memory or (with `--redis`) on
//! one Redis shared by every instance, over three listeners, each served when configured:
//!
//! * **gRPC**: Envoy's `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`. A
//!   descriptor with entries `(k1, v1), (k2, v2)` in domain `D` is the key `D/k1/v1/k2/v2`
//!   (an entry with an empty value adds only `k1`), limited by the rule of its longest
//!   configured prefix; a request's descriptors are judged all or nothing.
//! * **RESP** (the Redis protocol): redis-cell's `CL.THROTTLE key max_burst count period
//!   [quantity]` with exact GCRA, so every redis-cell client library works unchanged, and
//!   `LG.CHECK`/`LG.CHECKALL`/`LG.RULE` to check keys against the rules file, and
//!   `LG.ACQUIRE`/`LG.RELEASE` for permits (concurrency limits, fleet-wide with Redis).
//! * **HTTP**: `/metrics` (Prometheus text), `/buckets` (JSON), and `/`, a page listing the
//!   buckets that a person can filter and sort.
//!
//! The rules file is leakgate's TOML, or envoyproxy/ratelimit's YAML configuration (files named
//! `.yaml` or `.yml`). It is read again on SIGHUP and when it changes (applied once two polls in a
//! row read the same file, never when empty); every tracked key keeps the units it could admit
//! (capped at the new burst: no reload hands out units), and a file that does not parse is
//! refused, with the reason in the log, while the rules in force stay.
//!
//! What clients can make the service hold is bounded: the keys they make (`CL.THROTTLE`'s, one
//! bucket per key as in redis-cell, and those of descriptor overrides) take at most
//! [`Config::key_memory`] together, keys are at most 4 KiB, and a `MULTI` queues at most 1 MiB.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use leakgate_serve::{start, Config};
//! let config = Config::new("rules.toml")
//!     .grpc("127.0.0.1:8081".parse()?)
//!     .resp("127.0.0.1:6380".parse()?)
//!     .http("127.0.0.1:9090".parse()?);
//! let running = start(config).await?;
//! running.run_until_signalled().await;
//! # Ok(()) }
//! ```
//!
//! Tests build the service on a `ManualClock` with [`start_with_clock`], and every answer is
//! then exact and repeatable.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod auth;
mod backend;
mod cell;
mod checks;
mod config;
mod costs;
mod grpc;
mod http;
mod limits;
mod listen;
mod metrics;
mod permits;
mod resp;
mod rules;
mod server;
mod tat;

pub use config::{Config, ServeError};
pub use listen::raise_open_files_limit;
pub use rules::file::{RulesError, RulesFormat};
pub use rules::LoadedRules;
pub use server::{start, start_with_clock, Running, Signals};

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
