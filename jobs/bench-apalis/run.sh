#!/usr/bin/env bash
# leakgate-jobs beside apalis, same machine, same run: leakgate-jobs's unpaced throughput and a
# fleet of 3 workers on one 20/s lane, then apalis (SQLite backend) for the same two questions.
# Usage: bash jobs/bench-apalis/run.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ensure-postgres.sh
cargo bench -p leakgate-jobs --bench jobs -- unpaced fleet "$@"
cargo run --release --quiet --manifest-path jobs/bench-apalis/Cargo.toml -- "$@"
