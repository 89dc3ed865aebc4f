#!/usr/bin/env bash
# The C benchmark of leakgate's colour meters through the C ABI beside DPDK's rte_meter
# (ffi/bench/meters.c: the shared functions, the _excl ones, and the floor of the shared path,
# two uncontended lock cmpxchg a packet): builds leakgate-ffi in release, installs libdpdk-dev and pkg-config with
# apt-get if they are missing (as root; not part of CI), compiles meters.c against both and runs
# it. Usage: bash ffi/bench/run.sh [ROUNDS [BURSTS_PER_SLICE]]   (default 7 rounds, 32768)
# Without an installable libdpdk-dev it still runs, leakgate only.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=()
for pkg in libdpdk-dev pkg-config; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    if apt-cache policy libdpdk-dev | grep -q 'Candidate: (none)'; then
        echo "== libdpdk-dev is not available from apt here: leakgate's figures only"
        $sudo apt-get install -y -qq pkg-config >/dev/null || true
    else
        echo "== installing ${missing[*]} (apt-get)"
        $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
cargo build -q --release -p leakgate-ffi
target="${CARGO_TARGET_DIR:-target}"
out="$target/ffi-bench"
mkdir -p "$out"
if pkg-config --exists libdpdk 2>/dev/null; then
    dpdk=($(pkg-config --cflags --libs libdpdk))
    echo "== DPDK $(pkg-config --modversion libdpdk)"
else
    dpdk=(-DNO_DPDK)
fi
cc -std=gnu11 -O2 -Wall -Wextra -pthread -Iffi/include ffi/bench/meters.c \
    "$target/release/libleakgate_ffi.a" "${dpdk[@]}" -lm -ldl -lrt -o "$out/meters"
echo "== $(lscpu | grep 'Model name' | sed 's/  */ /g'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/meters" "$@"
