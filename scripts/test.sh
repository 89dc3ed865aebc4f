#!/usr/bin/env bash
# The whole test suite: unit, integration, property and doc tests, the large stress and flood
# tests, and the loom models. Needs a Rust toolchain; installs redis-server (Debian package) for
# leakgate-redis's tests if it is missing. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
bash scripts/ensure-serve-tools.sh

echo "== unit, integration, property and doc tests (all features)"
cargo test --workspace --all-features

# `--tests` leaves the doc tests out: they ran above, and `--ignored` would also run the README's
# `ignore` blocks, which name the sibling crates (leakgate-redis, leakgate-tower).
echo "== large stress and flood tests (release, #[ignore]d by default)"
cargo test --workspace --all-features --release --tests -- --ignored

echo "== loom models (every interleaving of the lock-free algorithms)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p leakgate-loom-tests --release
