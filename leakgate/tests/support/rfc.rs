//! Plain models of RFC 2697 and RFC 2698, written from the RFCs' text: buckets that start full
//! and gain one token at each tick of their rate (at `k * T`, `T = 1 / rate`, counted from the
//! clock's origin), in the RFCs' update order, and the RFCs' colour rules. The clock is
//! monotone: a model is asked at times that never go back.

use leakgate::Color;

/// Ticks of a rate of `count` per `period_ns` that have fallen by `t_ns`: `floor(t * count /
/// period)`, exactly.
fn ticks(t_ns: u64, count: u64, period_ns: u64) -> u64 {
    (u128::from(t_ns) * u128::from(count) / u128::from(period_ns)) as u64
}

/// RFC 2697, section 3, as written.
#[derive(Clone, Debug)]
pub(crate) struct RefSrTcm {
    cir: (u64, u64),
    cbs: u64,
    ebs: u64,
    tc: u64,
    te: u64,
    ticks: u64,
}

impl RefSrTcm {
    pub(crate) fn new(cir: (u64, u64), cbs: u64, ebs: u64) -> Self {
        // "The token buckets C and E are initially (at time 0) full."
        RefSrTcm { cir, cbs, ebs, tc: cbs, te: ebs, ticks: 0 }
    }

    /// `(Tc, Te)` as the last packet left them.
    pub(crate) fn tokens(&self) -> (u64, u64) {
        (self.tc, self.te)
    }

    /// "Thereafter, the token counts Tc and Te are updated CIR times per second as follows: If
    /// Tc is less than CBS, Tc is incremented by one, else if Te is less then EBS, Te is
    /// incremented by one, else neither Tc nor Te is incremented."
    fn advance(&mut self, t_ns: u64) {
        let now = ticks(t_ns, self.cir.0, self.cir.1);
        while self.ticks < now {
            self.ticks += 1;
            if self.tc < self.cbs {
                self.tc += 1;
            } else if self.te < self.ebs {
                self.te += 1;
            } else {
                // Both full: the remaining ticks change nothing.
                self.ticks = now;
            }
        }
    }

    /// Colour-aware metering; colour-blind is `pre = Green` (the RFC's two lists agree there).
    pub(crate) fn meter(&mut self, t_ns: u64, b: u64, pre: Color) -> Color {
        self.advance(t_ns);
        if pre == Color::Green && self.tc >= b {
            self.tc -= b;
            Color::Green
        } else if pre != Color::Red && self.te >= b {
            self.te -= b;
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// RFC 2698, section 3, as written.
#[derive(Clone, Debug)]
pub(crate) struct RefTrTcm {
    pir: (u64, u64),
    cir: (u64, u64),
    pbs: u64,
    cbs: u64,
    tp: u64,
    tc: u64,
    ticks: (u64, u64),
}

impl RefTrTcm {
    pub(crate) fn new(pir: (u64, u64), pbs: u64, cir: (u64, u64), cbs: u64) -> Self {
        RefTrTcm { pir, cir, pbs, cbs, tp: pbs, tc: cbs, ticks: (0, 0) }
    }

    /// `(Tp, Tc)` as the last packet left them.
    pub(crate) fn tokens(&self) -> (u64, u64) {
        (self.tp, self.tc)
    }

    /// "The token count Tp is incremented by one PIR times per second up to PBS and the token
    /// count Tc is incremented by one CIR times per second up to CBS."
    fn advance(&mut self, t_ns: u64) {
        let (p, c) = (ticks(t_ns, self.pir.0, self.pir.1), ticks(t_ns, self.cir.0, self.cir.1));
        self.tp = self.pbs.min(self.tp + (p - self.ticks.0).min(self.pbs));
        self.tc = self.cbs.min(self.tc + (c - self.ticks.1).min(self.cbs));
        self.ticks = (p, c);
    }

    pub(crate) fn meter(&mut self, t_ns: u64, b: u64, pre: Color) -> Color {
        self.advance(t_ns);
        if pre == Color::Red || self.tp < b {
            Color::Red
        } else if pre == Color::Yellow || self.tc < b {
            self.tp -= b;
            Color::Yellow
        } else {
            self.tp -= b;
            self.tc -= b;
            Color::Green
        }
    }
}
