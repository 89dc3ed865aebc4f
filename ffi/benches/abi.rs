//! What the C ABI costs per check over the Rust call: the same check on the same kind of
//! object, made directly on leakgate's type (`Limiter::check_n_at`, `SrTcm::color_blind_at`,
//! ...) and through the extern function on a handle (`lg_limiter_check_n_at`,
//! `lg_srtcm_color_blind_at`, ...) called through a function pointer the optimiser cannot see
//! through, as C calls into the library. Pairs interleaved round by round in one process;
//! median ns per call and the difference.
//!
//! `cargo bench -p leakgate-ffi --bench abi` (`LEAKGATE_ABI_ROUNDS=N` rounds, default 41). On a
//! shared machine the minimum over rounds (the slice least disturbed) is printed beside the
//! median.
//!
//! Caller time throughout (the clock is read once per slice): `admit` and `green` move it 2 ns
//! a call at rates that admit everything (every call writes its word), `deny` and `red` hold it
//! where the buckets are empty (every call only reads).

use leakgate::{KeyedLimiter, Limiter, Quota, SrTcm};
use leakgate_ffi::*;
use std::hint::black_box;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

const CALLS: u64 = 1 << 18;

/// One timed slice: ns per call of `f(i)` over `CALLS` calls.
fn slice(mut f: impl FnMut(u64) -> bool) -> f64 {
    let start = Instant::now();
    let mut yes = 0u64;
    for i in 0..CALLS {
        yes += u64::from(f(i));
    }
    black_box(yes);
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

fn quota(count: u64, burst: u64, bytes: u8) -> LgQuota {
    LgQuota { count, period_ns: 1_000_000_000, burst, bytes }
}

fn rust(q: LgQuota) -> Quota {
    let period = std::time::Duration::from_nanos(q.period_ns);
    let quota = if q.bytes == 1 {
        Quota::bytes(q.count, period, q.burst)
    } else {
        Quota::new(q.count, period, q.burst)
    };
    quota.expect("a valid quota")
}

fn limiter(q: LgQuota) -> *mut LgLimiter {
    let mut lim = null_mut();
    assert_eq!(unsafe { lg_limiter_new(&q, &mut lim) }, LG_OK);
    lim
}

fn srtcm(q: LgQuota, ebs: u64) -> *mut LgSrTcm {
    let mut m = null_mut();
    assert_eq!(unsafe { lg_srtcm_new(&q, ebs, &mut m) }, LG_OK);
    m
}

fn keyed(q: LgQuota) -> *mut LgKeyed {
    let mut k = null_mut();
    assert_eq!(unsafe { lg_keyed_new(&q, 1024, &mut k) }, LG_OK);
    k
}

type Call = Box<dyn FnMut(u64) -> bool>;

/// A check's name, and three ways to make it at caller time `t(i)`: the Rust method inlined into
/// the loop, the Rust method behind a call to an address (the call C makes), and the C ABI.
struct Contenders {
    name: &'static str,
    inlined: Call,
    called: Call,
    c_abi: Call,
}

/// `check(target, t(i))` behind a function pointer the optimiser cannot see through.
fn called<T: 'static>(target: &'static T, t: fn(u64) -> u64, check: fn(&T, u64) -> bool) -> Call {
    let check = black_box(check);
    Box::new(move |i| check(target, t(i)))
}

fn contenders() -> Vec<Contenders> {
    // Caller time: moving (a call every 2 ns from the start) or frozen. A static, as the
    // function pointers cannot capture it.
    static NOW: AtomicU64 = AtomicU64::new(0);
    let now = lg_now_ns();
    NOW.store(now, Relaxed);
    let moving: fn(u64) -> u64 = |i| NOW.load(Relaxed) + 2 * i;
    let frozen: fn(u64) -> u64 = |_| NOW.load(Relaxed);
    // Every call admitted: 10^9 a second, a call every 2 ns. Every call denied: empty buckets.
    let (fast, empty) = (quota(1_000_000_000, 1_000_000, 0), quota(1, 1, 0));
    // Green: 50 GB/s, 64-byte packets every 2 ns. Red: 1000 B/s, 64-byte buckets, drained.
    let (line, slow) = (quota(50_000_000_000, 1_000_000, 1), quota(1000, 64, 1));
    let admit: &'static Limiter = Box::leak(Box::new(Limiter::new(rust(fast))));
    let deny: &'static Limiter = Box::leak(Box::new(Limiter::new(rust(empty))));
    let green: &'static SrTcm = Box::leak(Box::new(SrTcm::new(rust(line), 0).expect("meter")));
    let red: &'static SrTcm = Box::leak(Box::new(SrTcm::new(rust(slow), 0).expect("meter")));
    let flows: &'static KeyedLimiter<u64> =
        Box::leak(Box::new(KeyedLimiter::with_capacity(rust(fast), 1024)));
    let (c_admit, c_deny, c_green, c_red, c_flows) =
        (limiter(fast), limiter(empty), srtcm(line, 0), srtcm(slow, 0), keyed(fast));
    let _ = (deny.check_n_at(1, now), red.color_blind_at(64, now));
    unsafe {
        lg_limiter_check_n_at(c_deny, 1, now, null_mut());
        lg_srtcm_color_blind_at(c_red, 64, now);
    }
    // The extern functions as C sees them: a call to an address.
    let check: unsafe extern "C" fn(*const LgLimiter, u64, u64, *mut LgReport) -> LgStatus =
        black_box(lg_limiter_check_n_at);
    let color: unsafe extern "C" fn(*const LgSrTcm, u64, u64) -> LgColor =
        black_box(lg_srtcm_color_blind_at);
    let keyed_check: unsafe extern "C" fn(
        *const LgKeyed,
        u64,
        u64,
        u64,
        *mut LgReport,
    ) -> LgStatus = black_box(lg_keyed_check_n_at);
    vec![
        Contenders {
            name: "limiter admit",
            inlined: Box::new(move |i| admit.check_n_at(1, moving(i)).is_ok()),
            called: called(admit, moving, |l, t| l.check_n_at(1, t).is_ok()),
            c_abi: Box::new(move |i| unsafe { check(c_admit, 1, moving(i), null_mut()) } == LG_OK),
        },
        Contenders {
            name: "limiter deny",
            inlined: Box::new(move |i| deny.check_n_at(1, frozen(i)).is_ok()),
            called: called(deny, frozen, |l, t| l.check_n_at(1, t).is_ok()),
            c_abi: Box::new(move |i| unsafe { check(c_deny, 1, frozen(i), null_mut()) } == LG_OK),
        },
        Contenders {
            name: "srTCM green",
            inlined: Box::new(move |i| green.color_blind_at(64, moving(i)) as u8 == LG_GREEN),
            called: called(green, moving, |m, t| m.color_blind_at(64, t) as u8 == LG_GREEN),
            c_abi: Box::new(move |i| unsafe { color(c_green, 64, moving(i)) } == LG_GREEN),
        },
        Contenders {
            name: "srTCM red",
            inlined: Box::new(move |i| red.color_blind_at(64, frozen(i)) as u8 == LG_GREEN),
            called: called(red, frozen, |m, t| m.color_blind_at(64, t) as u8 == LG_GREEN),
            c_abi: Box::new(move |i| unsafe { color(c_red, 64, frozen(i)) } == LG_GREEN),
        },
        Contenders {
            name: "keyed, 1k keys, admit",
            inlined: Box::new(move |i| flows.check_n_at(&(i & 1023), 1, moving(i)).is_ok()),
            called: called(flows, moving, |k, t| k.check_n_at(&((t / 2) & 1023), 1, t).is_ok()),
            c_abi: Box::new(move |i| {
                let status = unsafe { keyed_check(c_flows, i & 1023, 1, moving(i), null_mut()) };
                status == LG_OK
            }),
        },
    ]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize =
        std::env::var("LEAKGATE_ABI_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(41);
    // `cargo bench` passes --bench; anything else (a test run) makes one quick round.
    let rounds = if std::env::args().any(|a| a == "--bench") { rounds.max(1) } else { 1 };
    let mut all = contenders();
    let mut times = vec![[Vec::new(), Vec::new(), Vec::new()]; all.len()];
    for _ in 0..rounds {
        for (c, t) in all.iter_mut().zip(&mut times) {
            t[0].push(slice(&mut c.inlined));
            t[1].push(slice(&mut c.called));
            t[2].push(slice(&mut c.c_abi));
        }
    }
    println!("{rounds} rounds of {CALLS} calls each, interleaved; ns per call, median (min)");
    println!(
        "{:<22} {:>14} {:>14} {:>14} {:>16}",
        "check", "Rust inlined", "Rust, a call", "C ABI", "C ABI - a call"
    );
    for (c, [inlined, called, c_abi]) in all.iter().zip(&mut times) {
        let [i, r, c_ns] = [inlined, called, c_abi].map(|t| (median(t), t[0]));
        println!(
            "{:<22} {:>7.2} ({:>4.2}) {:>7.2} ({:>4.2}) {:>7.2} ({:>4.2}) {:>+7.2} ({:>+5.2})",
            c.name,
            i.0,
            i.1,
            r.0,
            r.1,
            c_ns.0,
            c_ns.1,
            c_ns.0 - r.0,
            c_ns.1 - r.1
        );
    }
}
