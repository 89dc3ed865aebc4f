#!/usr/bin/env bash
# The whole test suite: unit, integration, property and doc tests, the large stress and flood
# tests, and the loom models. Usage: bash scripts/test.sh
#
# Needs a Rust toolchain. Installs what is missing (Debian packages, through apt-get):
# redis-server for leakgate-redis's tests (scripts/ensure-redis.sh), postgresql for
# leakgate-jobs's (scripts/ensure-postgres.sh), and a C compiler for leakgate-ffi's C test
# (ffi/tests/c/run.sh). The tests start their own servers on free loopback
# ports and stop them (and remove their folders) when they end.
#
# Every step runs even if an earlier one failed; the last line is the total over all of them:
# "test.sh: N passed, M failed". The exit status is 0 only if everything passed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh || exit 1
bash scripts/ensure-postgres.sh || exit 1
bash scripts/ensure-serve-tools.sh || exit 1

passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs one step, its output shown, and adds up its tests: the "test result:" line of each test
# binary. A step that fails with no failed test (it did not build, a test binary crashed) counts
# as one failure; the suite goes on either way.
step() {
    echo "== $1 (${SECONDS}s)"
    shift
    local ok=1
    "$@" 2>&1 | tee "$log" || ok=0
    read -r p f < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$log")
    if [ "$ok" = 0 ] && [ "$f" = 0 ]; then
        f=1
        echo "== failed: $*"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}

step "unit, integration, property and doc tests (all features)" \
    cargo test --workspace --all-features

# leakgate-ffi from C: builds the static and shared library, compiles ffi/tests/c/*.c with cc
# (installed with apt-get if missing) and runs each, linked both ways, from several threads.
step "C ABI (a C program on leakgate-ffi, 4 threads, static and shared)" \
    bash ffi/tests/c/run.sh

# The test targets holding an #[ignore]d test, found afresh each run: `NAME` for
# `CRATE/tests/NAME.rs` or `CRATE/tests/NAME/` (a test split in modules), and `--lib` if a crate's
# own source has one. Only those are built in release: building the other 120-odd test binaries
# in release too took about 6 of CI's 29 minutes, to run nothing.
ignored_targets() {
    local f rest name
    grep -rl --include='*.rs' '#\[ignore' -- */tests 2>/dev/null | while read -r f; do
        rest=${f#*/tests/}
        name=${rest%%/*}
        name=${name%.rs}
        if [ -f "${f%%/tests/*}/tests/$name.rs" ] || [ -f "${f%%/tests/*}/tests/$name/main.rs" ]; then
            echo "--test $name"
        fi
    done | sort -u
    if grep -rlq --include='*.rs' '#\[ignore' -- */src; then echo "--lib"; fi
}
# Named targets leave the doc tests out: they ran above, and `--ignored` would also run the
# README's `ignore` blocks, which name the sibling crates (leakgate-redis, leakgate-tower).
# shellcheck disable=SC2046 # one word an option or a name
step "large stress and flood tests (release, #[ignore]d by default)" \
    cargo test --workspace --all-features --release $(ignored_targets) -- --ignored

step "no_std: the core built for a target without std, and tested without it" \
    bash scripts/nostd.sh

step "loom models (every interleaving of the lock-free algorithms)" \
    env RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p leakgate-loom-tests --release

# The closing line, over every test binary of every step.
echo "test.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
