//! The rules the service enforces, apart from the protocols that ask about them: reading a rules
//! file (`file.rs`: leakgate's TOML, or envoyproxy/ratelimit's YAML translated by
//! `envoy_yaml.rs`, with its `replaces` in `replaces.rs`), and keeping them current (`reload.rs`,
//! once a changed file is stable: `settle.rs`).

pub(crate) mod envoy_yaml;
pub(crate) mod file;
pub(crate) mod reload;
pub(crate) mod replaces;
pub(crate) mod settle;
