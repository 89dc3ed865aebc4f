//! The colour meters people write first: RFC 2697's and RFC 2698's token buckets behind a mutex.

use leakgate::Color;
use parking_lot::Mutex;

/// RFC 2697's srTCM as its text reads, behind a mutex: buckets `C` and `E` refilled from the
/// elapsed time at CIR (to `C` until full, then to `E`), tokens as `f64`.
///
/// ```
/// use leakgate::Color;
/// use leakgate_baselines::MutexSrTcm;
/// let meter = MutexSrTcm::new(1.0, 100, 50);
/// assert_eq!(meter.color_blind_at(100, 0), Color::Green);
/// assert_eq!(meter.color_blind_at(50, 0), Color::Yellow);
/// assert_eq!(meter.color_blind_at(1, 0), Color::Red);
/// ```
pub struct MutexSrTcm {
    state: Mutex<SrState>,
    per_ns: f64,
    cbs: f64,
    ebs: f64,
}

struct SrState {
    tc: f64,
    te: f64,
    /// The latest time seen, ns.
    last: u64,
}

impl MutexSrTcm {
    /// Full buckets of `cbs` and `ebs` bytes, refilled at `cir` bytes a second.
    ///
    /// ```
    /// let meter = leakgate_baselines::MutexSrTcm::new(1e6, 1500, 1500);
    /// assert_eq!(meter.color_blind_at(1500, 0), leakgate::Color::Green);
    /// ```
    pub fn new(cir: f64, cbs: u64, ebs: u64) -> Self {
        let (cbs, ebs) = (cbs as f64, ebs as f64);
        MutexSrTcm {
            state: Mutex::new(SrState { tc: cbs, te: ebs, last: 0 }),
            per_ns: cir / 1e9,
            cbs,
            ebs,
        }
    }

    /// The colour of a packet of `bytes` at `now_ns`, colour-blind.
    ///
    /// ```
    /// let meter = leakgate_baselines::MutexSrTcm::new(1e9, 1500, 0);
    /// assert_eq!(meter.color_blind_at(1500, 0), leakgate::Color::Green);
    /// assert_eq!(meter.color_blind_at(1500, 0), leakgate::Color::Red);
    /// assert_eq!(meter.color_blind_at(1500, 1500), leakgate::Color::Green);
    /// ```
    pub fn color_blind_at(&self, bytes: u64, now_ns: u64) -> Color {
        let b = bytes as f64;
        let mut s = self.state.lock();
        let mut add = now_ns.saturating_sub(s.last) as f64 * self.per_ns;
        s.last = s.last.max(now_ns);
        let to_c = add.min(self.cbs - s.tc);
        s.tc += to_c;
        add -= to_c;
        s.te = (s.te + add).min(self.ebs);
        if s.tc >= b {
            s.tc -= b;
            Color::Green
        } else if s.te >= b {
            s.te -= b;
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// RFC 2698's trTCM as its text reads, behind a mutex: buckets `P` and `C` refilled from the
/// elapsed time at PIR and CIR, tokens as `f64`.
///
/// ```
/// use leakgate::Color;
/// use leakgate_baselines::MutexTrTcm;
/// let meter = MutexTrTcm::new(2.0, 100, 1.0, 50);
/// assert_eq!(meter.color_blind_at(50, 0), Color::Green);
/// assert_eq!(meter.color_blind_at(50, 0), Color::Yellow);
/// assert_eq!(meter.color_blind_at(1, 0), Color::Red);
/// ```
pub struct MutexTrTcm {
    state: Mutex<TrState>,
    peak_per_ns: f64,
    committed_per_ns: f64,
    pbs: f64,
    cbs: f64,
}

struct TrState {
    tp: f64,
    tc: f64,
    last: u64,
}

impl MutexTrTcm {
    /// Full buckets of `pbs` and `cbs` bytes, refilled at `pir` and `cir` bytes a second.
    ///
    /// ```
    /// let meter = leakgate_baselines::MutexTrTcm::new(2e6, 3000, 1e6, 1500);
    /// assert_eq!(meter.color_blind_at(1500, 0), leakgate::Color::Green);
    /// ```
    pub fn new(pir: f64, pbs: u64, cir: f64, cbs: u64) -> Self {
        let (pbs, cbs) = (pbs as f64, cbs as f64);
        MutexTrTcm {
            state: Mutex::new(TrState { tp: pbs, tc: cbs, last: 0 }),
            peak_per_ns: pir / 1e9,
            committed_per_ns: cir / 1e9,
            pbs,
            cbs,
        }
    }

    /// The colour of a packet of `bytes` at `now_ns`, colour-blind.
    ///
    /// ```
    /// let meter = leakgate_baselines::MutexTrTcm::new(1e9, 1500, 1e9, 1500);
    /// assert_eq!(meter.color_blind_at(1500, 0), leakgate::Color::Green);
    /// assert_eq!(meter.color_blind_at(1500, 0), leakgate::Color::Red);
    /// ```
    pub fn color_blind_at(&self, bytes: u64, now_ns: u64) -> Color {
        let b = bytes as f64;
        let mut s = self.state.lock();
        let elapsed = now_ns.saturating_sub(s.last) as f64;
        s.last = s.last.max(now_ns);
        s.tp = (s.tp + elapsed * self.peak_per_ns).min(self.pbs);
        s.tc = (s.tc + elapsed * self.committed_per_ns).min(self.cbs);
        if s.tp < b {
            Color::Red
        } else if s.tc < b {
            s.tp -= b;
            Color::Yellow
        } else {
            s.tp -= b;
            s.tc -= b;
            Color::Green
        }
    }
}
