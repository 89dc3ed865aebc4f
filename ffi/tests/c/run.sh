#!/usr/bin/env bash
# Builds leakgate-ffi (static and shared library), compiles the C tests in this folder with cc
# against ffi/include/leakgate.h, and runs each twice: linked statically and dynamically.
# Each run prints a cargo-style "test result:" line. Usage: bash ffi/tests/c/run.sh
# Installs gcc with apt-get if no cc is found.
set -euo pipefail
cd "$(dirname "$0")/../../.."
if ! command -v cc >/dev/null 2>&1; then
    source scripts/apt-install.sh
    apt_install gcc libc6-dev
fi
cargo build -q -p leakgate-ffi
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
lib="$target/debug"
out="$target/ffi-c-tests"
mkdir -p "$out"
flags=(-std=c11 -O1 -g -Wall -Wextra -Wpedantic -Werror -pthread -Iffi/include)
status=0
for test in ffi/tests/c/*.c; do
    name=$(basename "$test" .c)
    cc "${flags[@]}" "$test" "$lib/libleakgate_ffi.a" -lm -ldl -lrt -o "$out/$name-static"
    cc "${flags[@]}" "$test" -L"$lib" -lleakgate_ffi -Wl,-rpath,"$lib" -o "$out/$name-shared"
    for linked in static shared; do
        echo "== $name ($linked)"
        "$out/$name-$linked" || status=1
    done
done
exit $status
