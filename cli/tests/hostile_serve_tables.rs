//! Hostile clients against what `leakgate serve` holds for them, each the reproducer that found
//! the defect (in `tests/hostile/`), run on the built binary: it exits 0 once the defect is gone,
//! 1 while it is there, 2 when it could not set itself up.
//!
//! The two that push memory toward 2 GiB on a defective build, and take 10-25 s, are ignored by
//! default; CI's release stress step runs them
//! (`cargo test --workspace --all-features --release --tests -- --ignored`).

use std::path::Path;
use std::process::Command;

/// Runs `tests/hostile/<script>` with the built `leakgate`, and fails with its output unless it
/// says the defect is gone.
fn reproducer_passes(script: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile").join(script);
    let out = Command::new("bash")
        .arg(&path)
        .arg(env!("CARGO_BIN_EXE_leakgate"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run bash {}: {e}", path.display()));
    let said = format!(
        "{script} exited {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(2), "could not set up (python3, redis-cli?): {said}");
    assert!(out.status.success(), "{said}");
}

/// `CL.THROTTLE k 4 1 60` five times, then `CL.THROTTLE k 5 1 60`: one more (6 in all, as
/// redis-cell), not a fresh bucket (11).
#[test]
fn cl_throttle_with_new_params_keeps_the_keys_bucket() {
    reproducer_passes("serve_cl_throttle_new_params_fresh_bucket.sh");
}

/// 8 quotas x 65,536 keys of 4 KB, each kept a day: resident memory stays under 2 GiB (the key
/// budget, 256 MiB by default, refuses new keys past it).
#[test]
#[ignore = "heavy: about 25 s, and 3 GiB on a defective build; run with --ignored"]
fn keyed_memory_stays_within_the_key_budget() {
    reproducer_passes("serve_keyed_memory_unbounded.sh");
}

/// Two connections queue 1,024 commands of 1 MiB in MULTI and never EXEC: resident memory grows
/// by less than 256 MiB (a MULTI queues at most 1 MiB).
#[test]
#[ignore = "heavy: about 10 s, and 2 GiB on a defective build; run with --ignored"]
fn multi_queue_memory_is_bounded() {
    reproducer_passes("serve_multi_queue_memory.sh");
}
