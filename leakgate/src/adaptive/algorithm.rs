//! AIMD and Gradient2 as plain state machines: a sample in, a new limit out.
//!
//! Both follow the algorithms of Netflix's `concurrency-limits`, written here from their
//! description:
//!
//! * **AIMD** (additive increase, multiplicative decrease, as TCP's congestion window): each
//!   success adds `1 / limit` (one a round trip when the window is full), while at least half the
//!   limit is in use (an idle client learns nothing about the server); a drop multiplies the limit
//!   by `backoff` (0.9), at most once a round trip: drops of requests admitted before the last
//!   decrease are the same congestion, already answered.
//! * **Gradient2**: samples are gathered in windows of `max(MIN_WINDOW, limit)` successes (about
//!   a round trip at full use, as Netflix's windowed limit does); at the end of each, it compares
//!   the window's mean latency (`short`) with a long-run average (`long`, an exponential average
//!   over `LONG_WINDOW` windows). `gradient = clamp(TOLERANCE * long / short, 0.5, 1)`; the new
//!   limit is `limit * gradient + sqrt(limit)` (the square root is the queue it allows itself),
//!   smoothed (`SMOOTHING`) toward the old one. When latency falls well below the average
//!   (`long > 2 * short`) the average decays toward it, so a server that recovered is believed
//!   quickly. A window in which less than half the limit was ever in use leaves the limit alone
//!   (an idle client learns nothing). Drops count as AIMD's do (once a round trip, times
//!   `BACKOFF`).
//!
//! Both stay within `[min, max]`.

/// The AIMD decrease on a drop.
const BACKOFF: f64 = 0.9;
/// Gradient2: latency may grow to `TOLERANCE` times the average before the limit falls.
const TOLERANCE: f64 = 1.5;
/// Gradient2: the weight of a new limit against the old.
const SMOOTHING: f64 = 0.2;
/// Gradient2: the long average's window, in windows.
const LONG_WINDOW: f64 = 20.0;
/// Gradient2: the fewest successes in a window.
const MIN_WINDOW: u32 = 10;

/// Which algorithm, with its state.
#[derive(Debug, Clone)]
pub(crate) enum Algorithm {
    Aimd,
    Gradient2(Gradient2),
}

/// Gradient2's state beside the limit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gradient2 {
    /// The long-run average latency, ns; 0 before the first window.
    long_ns: f64,
    /// The window so far: latencies summed, samples, the most in flight seen.
    sum_ns: f64,
    count: u32,
    peak_in_flight: u32,
}

/// One algorithm's state: the limit (fractional: increases come in fractions) and the
/// generation that counts round trips for "once a round trip".
#[derive(Debug, Clone)]
pub(crate) struct Adaptive {
    pub(crate) algorithm: Algorithm,
    pub(crate) limit: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// Bumped by every decrease; a permit remembers the one it was admitted in.
    pub(crate) generation: u64,
}

/// How a permit's work ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    /// Done, in this many nanoseconds.
    Success(u64),
    /// Overload: a timeout, a 429, a 5xx.
    Dropped,
}

impl Adaptive {
    pub(crate) fn new(algorithm: Algorithm, min: u32, initial: u32, max: u32) -> Self {
        Adaptive {
            algorithm,
            limit: f64::from(initial),
            min: f64::from(min),
            max: f64::from(max),
            generation: 0,
        }
    }

    /// The whole limit in force.
    pub(crate) fn whole(&self) -> u32 {
        // In [min, max] ⊂ [1, MAX_PERMITS]: the cast neither saturates nor wraps.
        self.limit.floor().clamp(self.min, self.max) as u32
    }

    /// Takes one sample of a permit admitted in `generation` with `in_flight` then held.
    pub(crate) fn sample(&mut self, outcome: Outcome, generation: u64, in_flight: u32) {
        match outcome {
            Outcome::Dropped => {
                if generation == self.generation {
                    self.limit = (self.limit * BACKOFF).max(self.min);
                    self.generation = self.generation.wrapping_add(1);
                }
            }
            Outcome::Success(rtt_ns) => match &mut self.algorithm {
                Algorithm::Aimd => {
                    if f64::from(in_flight) * 2.0 >= self.limit {
                        self.limit = (self.limit + 1.0 / self.limit).min(self.max);
                    }
                }
                Algorithm::Gradient2(g) => {
                    g.sum_ns += rtt_ns as f64;
                    g.count += 1;
                    g.peak_in_flight = g.peak_in_flight.max(in_flight);
                    // In [min, max]: the cast is exact.
                    let window = (self.limit as u32).max(MIN_WINDOW);
                    if g.count < window {
                        return;
                    }
                    let short = (g.sum_ns / f64::from(g.count)).max(1.0);
                    let used = f64::from(g.peak_in_flight);
                    (g.sum_ns, g.count, g.peak_in_flight) = (0.0, 0, 0);
                    if g.long_ns == 0.0 {
                        g.long_ns = short;
                    }
                    g.long_ns += (short - g.long_ns) / LONG_WINDOW;
                    if g.long_ns > 2.0 * short {
                        g.long_ns *= 0.95;
                    }
                    if used * 2.0 < self.limit {
                        return; // the client is not using what it has: no news
                    }
                    let gradient = (TOLERANCE * g.long_ns / short).clamp(0.5, 1.0);
                    let next = self.limit * gradient + self.limit.sqrt();
                    let next = self.limit * (1.0 - SMOOTHING) + next * SMOOTHING;
                    if next < self.limit.floor() {
                        // A fall is a decrease: permits admitted before it are an older round.
                        self.generation = self.generation.wrapping_add(1);
                    }
                    self.limit = next.clamp(self.min, self.max);
                }
            },
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn aimd_grows_by_one_a_full_round_and_backs_off_once_a_round() {
        let mut a = Adaptive::new(Algorithm::Aimd, 1, 10, 100);
        for _ in 0..10 {
            a.sample(Outcome::Success(1), 0, 10);
        }
        assert_eq!(a.whole(), 10); // 10 * 1/10.x: just under one
        a.sample(Outcome::Success(1), 0, 10);
        assert_eq!(a.whole(), 11);
        let before = a.limit;
        a.sample(Outcome::Dropped, 0, 11);
        a.sample(Outcome::Dropped, 0, 11); // the same round: already answered
        assert!((a.limit - before * BACKOFF).abs() < 1e-9);
    }

    #[test]
    fn an_idle_client_does_not_grow() {
        let mut a = Adaptive::new(Algorithm::Aimd, 1, 10, 100);
        for _ in 0..1000 {
            a.sample(Outcome::Success(1), 0, 1);
        }
        assert_eq!(a.whole(), 10);
    }

    #[test]
    fn never_below_min_or_above_max() {
        let mut a = Adaptive::new(Algorithm::Gradient2(Gradient2::default()), 3, 5, 8);
        for g in 0..100 {
            a.sample(Outcome::Dropped, g, 5);
        }
        assert_eq!(a.whole(), 3);
        for _ in 0..1000 {
            a.sample(Outcome::Success(1_000), a.generation, 8);
        }
        assert_eq!(a.whole(), 8);
    }

    #[test]
    fn gradient2_falls_when_latency_jumps_past_its_tolerance() {
        let mut a = Adaptive::new(Algorithm::Gradient2(Gradient2::default()), 1, 20, 100);
        for _ in 0..200 {
            a.sample(Outcome::Success(10_000_000), 0, 20);
        }
        let steady = a.limit;
        for _ in 0..300 {
            a.sample(Outcome::Success(40_000_000), 0, 100); // four times slower
        }
        assert!(a.limit < steady, "{} !< {steady}", a.limit);
    }
}
