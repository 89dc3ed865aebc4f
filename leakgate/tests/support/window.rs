//! The bound the leased meters state, checked over every window of a run: a test file takes it
//! with `#[path = "support/window.rs"] mod window;`.

use leakgate::Color;

/// CIR's ticks fallen by `ns`, exactly.
pub(crate) fn ticks(rate: (u64, u64), ns: u64) -> u128 {
    u128::from(ns) * u128::from(rate.0) / u128::from(rate.1)
}

/// Checks, over every window that starts and ends at a packet, that the units of the colours
/// `counted` stay within `size + ticks + e`.
pub(crate) fn assert_bound(
    rate: (u64, u64),
    size: u64,
    e: u64,
    packets: &[(u64, u64, Color)],
    counted: &[Color],
) {
    let packets: Vec<_> = packets.iter().filter(|p| counted.contains(&p.2)).collect();
    for i in 0..packets.len() {
        let t1 = packets[i].0;
        let mut sum = 0u128;
        for &&(t2, n, _) in &packets[i..] {
            sum += u128::from(n);
            let limit = u128::from(size) + ticks(rate, t2) - ticks(rate, t1) + u128::from(e);
            assert!(sum <= limit, "{counted:?}: {sum} in [{t1}, {t2}] ns, bound {limit}");
        }
    }
}
