//! Regressions from an adversarial review of `leakgate pace` on odd input.

mod common;

use common::pace;

/// A valid quota (2 per century, burst 2) in meter mode: the third line made the library's GCRA
/// step overflow (a panic in a debug build). Fixed in the core; pinned here end to end.
#[test]
fn long_bucket_quota_in_meter_mode_does_not_crash() {
    let out = pace(&["2/36500d burst 2", "--drop"], b"a\nb\nc\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout, b"a\nb\n");
}

/// One non-UTF-8 line ended the whole run with an error, losing every later line.
#[test]
fn a_non_utf8_line_does_not_stop_the_stream() {
    let out = pace(&["1000/s"], b"a\n\xff\xfe\nc\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"a\n\xff\xfe\nc\n", "every line, byte for byte");
}
