//! The colour meters under threads: on a clock that stands still every bucket holds exactly its
//! size less what the packets of its colours took (nothing partial is ever left behind, and
//! nothing over-admitted); on a moving clock no bucket ever admits more than `burst + rate * t`.

use leakgate::{Color, KeyedSrTcm, KeyedTrTcm, ManualClock, Quota, SrTcm, TrTcm};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const THREADS: u64 = 4;
const PACKETS: u64 = 20_000;

/// A packet size between 40 and 1540 bytes from a xorshift state.
fn size(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    40 + *state % 1501
}

/// Bytes metered green, yellow and red.
#[derive(Clone, Copy, Default, Debug)]
struct Totals([u64; 3]);

impl Totals {
    fn add(&mut self, colour: Color, bytes: u64) {
        self.0[colour as usize] += bytes;
    }
    fn sum(all: impl IntoIterator<Item = Totals>) -> Totals {
        all.into_iter().fold(Totals::default(), |mut t, u| {
            (0..3).for_each(|i| t.0[i] += u.0[i]);
            t
        })
    }
}

/// Runs `THREADS` threads that each meter `PACKETS` packets through `meter(thread, i, size)`.
fn hammer(meter: impl Fn(u64, u64, u64) -> Color + Sync) -> Totals {
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let meter = &meter;
                s.spawn(move || {
                    let (mut state, mut totals) = (0x9e37_79b9 + thread, Totals::default());
                    for i in 0..PACKETS {
                        let bytes = size(&mut state);
                        totals.add(meter(thread, i, bytes), bytes);
                    }
                    totals
                })
            })
            .collect();
        Totals::sum(threads.into_iter().map(|t| t.join().unwrap()))
    })
}

fn bytes(per_second: u64, burst: u64) -> Quota {
    Quota::bytes_per_second(per_second).unwrap().with_burst(burst).unwrap()
}

#[test]
fn on_a_still_clock_every_bucket_holds_its_size_less_its_colours() {
    // Small buckets, so that many packets race for their last bytes; several rounds.
    for round in 0..20 {
        let (cbs, ebs) = (30_000, 20_000);
        let meter = SrTcm::with_clock(bytes(1_000_000, cbs), ebs, ManualClock::new()).unwrap();
        // Every fourth packet arrives yellow: it may only take E.
        let [green, yellow, _] = hammer(|_, i, n| match i % 4 {
            0 => meter.color_aware(n, Color::Yellow),
            _ => meter.color_blind(n),
        })
        .0;
        assert_eq!(meter.tokens_at(0), (cbs - green, ebs - yellow), "round {round}");

        let (pbs, cbs) = (50_000, 30_000);
        let meter =
            TrTcm::with_clock(bytes(2_000_000, pbs), bytes(1_000_000, cbs), ManualClock::new())
                .unwrap();
        let [green, yellow, _] = hammer(|_, i, n| match i % 4 {
            0 => meter.color_aware(n, Color::Yellow),
            _ => meter.color_blind(n),
        })
        .0;
        assert_eq!(meter.tokens_at(0), (pbs - green - yellow, cbs - green), "round {round}");
    }
}

#[test]
fn keyed_meters_on_a_still_clock_hold_each_flows_size_less_its_colours() {
    // Two flows, each shared by two threads: per flow, the same exact accounting.
    let (cbs, ebs) = (100_000, 50_000);
    let sr = KeyedSrTcm::<u64, _>::with_capacity_and_clock(
        bytes(1_000_000, cbs),
        ebs,
        64,
        ManualClock::new(),
    )
    .unwrap();
    let per_flow = |meter: &(dyn Fn(u64, u64) -> Color + Sync)| {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|thread| {
                    s.spawn(move || {
                        let (mut state, mut totals) = (0x51ed + thread, Totals::default());
                        for _ in 0..PACKETS / 4 {
                            let bytes = size(&mut state);
                            totals.add(meter(thread % 2, bytes), bytes);
                        }
                        (thread % 2, totals)
                    })
                })
                .collect();
            let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            [0, 1].map(|flow| Totals::sum(results.iter().filter(|r| r.0 == flow).map(|r| r.1)))
        })
    };
    for (flow, Totals([green, yellow, _])) in
        per_flow(&|flow, n| sr.color_blind(&flow, n)).into_iter().enumerate()
    {
        assert_eq!(sr.tokens_at(&(flow as u64), 0), (cbs - green, ebs - yellow), "flow {flow}");
    }
    let (pbs, cbs) = (200_000, 100_000);
    let tr = KeyedTrTcm::<u64, _>::with_capacity_and_clock(
        bytes(2_000_000, pbs),
        bytes(1_000_000, cbs),
        64,
        ManualClock::new(),
    )
    .unwrap();
    for (flow, Totals([green, yellow, _])) in
        per_flow(&|flow, n| tr.color_blind(&flow, n)).into_iter().enumerate()
    {
        assert_eq!(
            tr.tokens_at(&(flow as u64), 0),
            (pbs - green - yellow, cbs - green),
            "flow {flow}"
        );
    }
}

thread_local! {
    /// A thread's clock reading for its current burst of packets (caller time).
    static BURST_TIME: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `hammer` while another thread moves `clock` on by 1 us at a time; returns the totals and
/// the clock's last reading in ns.
fn with_moving_clock(
    clock: &ManualClock,
    meter: impl Fn(u64, u64, u64) -> Color + Sync,
) -> (Totals, u64) {
    let done = AtomicBool::new(false);
    let totals = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                clock.advance(Duration::from_micros(1));
                std::thread::yield_now();
            }
        });
        let totals = hammer(&meter);
        done.store(true, Ordering::Relaxed);
        totals
    });
    (totals, clock.now().as_nanos() as u64)
}

#[test]
fn on_a_moving_clock_no_bucket_admits_more_than_burst_plus_rate_times_t() {
    // 100 MB/s: 0.1 byte a nanosecond, so the clock's 1 us steps refill 100 bytes each.
    let (cbs, ebs) = (20_000, 10_000);
    let ticks = |t_ns: u64, per_second: u64| t_ns * per_second / 1_000_000_000;
    for caller_time in [false, true] {
        let clock = ManualClock::new();
        let meter = SrTcm::with_clock(bytes(100_000_000, cbs), ebs, clock.clone()).unwrap();
        // With caller time each thread reads the clock once per 32 packets.
        let (Totals([green, yellow, _]), t) = with_moving_clock(&clock, |_, i, n| {
            if caller_time {
                let now = BURST_TIME.with(|time| {
                    if i % 32 == 0 {
                        time.set(clock.now().as_nanos() as u64);
                    }
                    time.get()
                });
                meter.color_blind_at(n, now)
            } else {
                meter.color_blind(n)
            }
        });
        assert!(green <= cbs + ticks(t, 100_000_000), "green {green} at {t} ns");
        assert!(green + yellow <= cbs + ebs + ticks(t, 100_000_000), "{green} + {yellow} at {t}");
        assert!(green > 0 && yellow > 0, "the test must reach both buckets' limits");
    }
    let (pbs, cbs) = (20_000, 10_000);
    let clock = ManualClock::new();
    let meter =
        TrTcm::with_clock(bytes(200_000_000, pbs), bytes(100_000_000, cbs), clock.clone()).unwrap();
    let (Totals([green, yellow, red]), t) =
        with_moving_clock(&clock, |_, _, n| meter.color_blind(n));
    assert!(green + yellow <= pbs + ticks(t, 200_000_000), "{green} + {yellow} at {t}");
    assert!(green <= cbs + ticks(t, 100_000_000), "green {green} at {t}");
    assert!(green > 0 && yellow > 0 && red > 0, "the test must reach both buckets' limits");
}
