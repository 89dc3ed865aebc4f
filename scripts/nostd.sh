#!/usr/bin/env bash
# leakgate without std (issue 20 item 5). Usage: bash scripts/nostd.sh
#
# 1. nostd-check, a #![no_std] crate that uses every item of leakgate's no_std core, built for
#    x86_64-unknown-none, a target with no std at all: a `std` in leakgate's core or in one of
#    its no_std dependencies fails here (on the host it could go unnoticed). Without and with
#    the feature `alloc`.
# 2. A target without 64-bit atomics (thumbv7m-none-eabi): leakgate stops with its
#    compile_error! that names the reason, and builds with the feature `portable-atomic`.
# 3. nostd-check's tests on the host, against leakgate built without std (the spin lock of
#    set_quota, parse errors without an allocator). `cargo test -p leakgate --no-default-features`
#    cannot do this: leakgate's dev-dependencies depend on leakgate with std, which features
#    unify into the test build.
#
# Targets are installed with rustup, quietly. Where one cannot be, the step says so: for
# x86_64-unknown-none it builds for the host instead (a std dependency then goes unnoticed); the
# 32-bit check is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="-D warnings"

has_target() {
    rustup target add "$1" >/dev/null 2>&1 || true
    rustup target list --installed 2>/dev/null | grep -qx "$1"
}

if has_target x86_64-unknown-none; then
    target=(--target x86_64-unknown-none)
    echo "== nostd: nostd-check for x86_64-unknown-none (no std on that target)"
else
    target=()
    echo "== nostd: x86_64-unknown-none cannot be installed here: building nostd-check for the" \
        "host instead (leakgate is #![no_std] still, but a std dependency would go unnoticed)"
fi
cargo build -q -p leakgate-nostd-check "${target[@]}"
cargo build -q -p leakgate-nostd-check --features alloc "${target[@]}"

if has_target thumbv7m-none-eabi; then
    echo "== nostd: thumbv7m-none-eabi (no 64-bit atomics): a clear error, or portable-atomic"
    out=$(cargo build -q -p leakgate --no-default-features --target thumbv7m-none-eabi 2>&1 || true)
    if ! grep -q "leakgate needs 64-bit atomics" <<<"$out"; then
        echo "nostd: expected leakgate's compile_error! about 64-bit atomics, got:"
        echo "$out"
        exit 1
    fi
    cargo build -q -p leakgate --no-default-features --features portable-atomic \
        --target thumbv7m-none-eabi
else
    echo "== nostd: thumbv7m-none-eabi cannot be installed here: the 32-bit check is skipped"
fi

echo "== nostd: nostd-check's tests on the host (leakgate without std)"
cargo test -q -p leakgate-nostd-check
