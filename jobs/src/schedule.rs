//! Schedules: a job added to a lane on every tick of a cron expression or an interval.
//!
//! The ticks are computed here, from a schedule's stored next tick and the time of the claim
//! that finds it due ([`Schedule::due`]); the stores add the tick's job in the claim transaction
//! with the key `(schedule, tick)` unique in the database, so however many workers find the
//! same tick due at once, one job is added for it.
//!
//! Missed ticks: the latest tick due when a worker gets to a schedule is added; earlier ticks
//! that came and went while no worker ran are *missed*. [`Missed::Skip`] (the default) adds
//! nothing for them; [`Missed::Once`] adds one job between them (for the latest of them).

use crate::error::Error;
use crate::job::{MAX_PAYLOAD, NewJob};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::time::Duration;

/// What a schedule does about ticks missed while no worker ran.
///
/// ```
/// assert_eq!(leakgate_jobs::Missed::default(), leakgate_jobs::Missed::Skip);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Missed {
    /// Nothing is added for them.
    #[default]
    Skip,
    /// One job is added for all of them together.
    Once,
}

/// When a schedule ticks.
///
/// ```
/// use leakgate_jobs::Every;
/// let nightly = Every::cron("0 3 * * *", Some("Europe/Paris"));
/// let often = Every::Interval(std::time::Duration::from_secs(30));
/// # let _ = (nightly, often);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Every {
    /// A cron expression (5 fields, or 6 with seconds first), in a time zone (IANA name; UTC
    /// when `None`).
    Cron {
        /// The expression.
        expr: String,
        /// The time zone.
        zone: Option<String>,
    },
    /// Every so often, from the time the schedule was stored (at least a second).
    Interval(Duration),
}

impl Every {
    /// A cron expression in a zone (UTC when `None`).
    ///
    /// ```
    /// let every = leakgate_jobs::Every::cron("*/5 * * * *", None);
    /// # let _ = every;
    /// ```
    pub fn cron(expr: impl Into<String>, zone: Option<&str>) -> Self {
        Every::Cron { expr: expr.into(), zone: zone.map(str::to_string) }
    }

    /// The stored form, in both stores: (cron, zone, interval_ns).
    pub(crate) fn columns(&self) -> (Option<&str>, Option<&str>, Option<i64>) {
        match self {
            Every::Cron { expr, zone } => (Some(expr), zone.as_deref(), None),
            Every::Interval(d) => (None, None, Some(d.as_nanos().min(i64::MAX as u128) as i64)),
        }
    }
}

/// A schedule: a named job template added on every tick.
///
/// ```
/// use leakgate_jobs::{Every, Missed, Schedule};
/// let s = Schedule::new("nightly-report", Every::cron("0 3 * * *", None), "reports", "full")
///     .missed(Missed::Once);
/// assert!(s.check().is_ok());
/// assert!(Schedule::new("x", Every::cron("61 * * * *", None), "r", "").check().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub(crate) name: String,
    pub(crate) every: Every,
    pub(crate) lane: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) missed: Missed,
}

/// The shortest interval.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

impl Schedule {
    /// A schedule named `name` adding `payload` to `lane` on every tick of `every`.
    ///
    /// ```
    /// let s = leakgate_jobs::Schedule::new("n", leakgate_jobs::Every::cron("* * * * *", None), "l", "p");
    /// assert_eq!(s.name(), "n");
    /// ```
    pub fn new(
        name: impl Into<String>,
        every: Every,
        lane: impl Into<String>,
        payload: impl Into<Vec<u8>>,
    ) -> Self {
        Schedule {
            name: name.into(),
            every,
            lane: lane.into(),
            payload: payload.into(),
            missed: Missed::Skip,
        }
    }

    /// What to do about missed ticks (see the module docs).
    ///
    /// ```
    /// use leakgate_jobs::{Every, Missed, Schedule};
    /// let s = Schedule::new("n", Every::cron("* * * * *", None), "l", "").missed(Missed::Once);
    /// # let _ = s;
    /// ```
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }

    /// Its name.
    ///
    /// ```
    /// let s = leakgate_jobs::Schedule::new("n", leakgate_jobs::Every::cron("* * * * *", None), "l", "");
    /// assert_eq!(s.name(), "n");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// When it ticks.
    ///
    /// ```
    /// use leakgate_jobs::{Every, Schedule};
    /// let s = Schedule::new("n", Every::cron("* * * * *", None), "l", "");
    /// assert_eq!(s.every(), &Every::cron("* * * * *", None));
    /// ```
    pub fn every(&self) -> &Every {
        &self.every
    }

    /// The lane its jobs go to.
    ///
    /// ```
    /// let s = leakgate_jobs::Schedule::new("n", leakgate_jobs::Every::cron("* * * * *", None), "l", "");
    /// assert_eq!(s.lane(), "l");
    /// ```
    pub fn lane(&self) -> &str {
        &self.lane
    }

    /// The payload of its jobs.
    ///
    /// ```
    /// let s = leakgate_jobs::Schedule::new("n", leakgate_jobs::Every::cron("* * * * *", None), "l", "p");
    /// assert_eq!(s.payload(), b"p");
    /// ```
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// What it does about missed ticks.
    ///
    /// ```
    /// use leakgate_jobs::{Every, Missed, Schedule};
    /// let s = Schedule::new("n", Every::cron("* * * * *", None), "l", "");
    /// assert_eq!(s.on_missed(), Missed::Skip);
    /// ```
    pub fn on_missed(&self) -> Missed {
        self.missed
    }

    /// Whether it can be stored: a name and lane as a job's lane, a payload as a job's, a cron
    /// expression that parses in a zone that exists, an interval of at least a second.
    ///
    /// ```
    /// use leakgate_jobs::{Every, Schedule};
    /// let zone = Every::cron("* * * * *", Some("Mars/Olympus"));
    /// assert!(Schedule::new("n", zone, "l", "").check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        NewJob::new(&self.lane, Vec::new()).check()?;
        NewJob::new(&self.name, Vec::new())
            .check()
            .map_err(|e| Error::BadSchedule(format!("name {:?}: {e}", self.name)))?;
        if self.payload.len() > MAX_PAYLOAD {
            return Err(Error::PayloadTooLarge { size: self.payload.len() });
        }
        Ticks::of(&self.every).map(|_| ())
    }
}

/// A stored schedule, as listed.
///
/// ```
/// # fn f(s: leakgate_jobs::ScheduleInfo) { println!("{} next at {}", s.schedule.name(), s.next_tick_ns); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The schedule.
    pub schedule: Schedule,
    /// Its next tick, ns since the epoch.
    pub next_tick_ns: i64,
}

/// A parsed `Every`: what computes ticks.
pub(crate) enum Ticks {
    Cron(Box<Cron>, TimeZone),
    Interval(i64),
}

/// The jobs a due schedule adds (their ticks, oldest first) and its next tick after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) ticks: Vec<i64>,
    pub(crate) next: i64,
}

impl Ticks {
    pub(crate) fn of(every: &Every) -> Result<Ticks, Error> {
        match every {
            Every::Interval(d) if *d < MIN_INTERVAL => Err(Error::BadSchedule(format!(
                "an interval of {d:?} is shorter than the shortest, {MIN_INTERVAL:?}"
            ))),
            Every::Interval(d) => Ok(Ticks::Interval(d.as_nanos().min(i64::MAX as u128) as i64)),
            Every::Cron { expr, zone } => {
                let parser = CronParser::builder().seconds(Seconds::Optional).build();
                let cron = parser.parse(expr).map_err(|e| {
                    Error::BadSchedule(format!("the cron expression {expr:?} does not parse: {e}"))
                })?;
                let tz = match zone {
                    None => TimeZone::UTC,
                    Some(z) => TimeZone::get(z)
                        .map_err(|e| Error::BadSchedule(format!("no time zone {z:?}: {e}")))?,
                };
                Ok(Ticks::Cron(Box::new(cron), tz))
            }
        }
    }

    /// The first tick after `t` (ns); `None` when there is none (a cron that never matches
    /// again, a time out of range).
    pub(crate) fn after(&self, t: i64) -> Option<i64> {
        match self {
            Ticks::Interval(d) => t.checked_add(*d),
            Ticks::Cron(cron, tz) => {
                let at = Timestamp::from_nanosecond(i128::from(t)).ok()?.to_zoned(tz.clone());
                let next = cron.find_next_occurrence(&at, false).ok()?;
                i64::try_from(next.timestamp().as_nanosecond()).ok()
            }
        }
    }

    /// The latest tick at or before `t`, if one is at or after `from`.
    fn latest(&self, from: i64, t: i64) -> Option<i64> {
        match self {
            Ticks::Interval(d) => (t >= from).then(|| from + (t - from) / d * d),
            Ticks::Cron(cron, tz) => {
                let at = Timestamp::from_nanosecond(i128::from(t)).ok()?.to_zoned(tz.clone());
                let prev = cron.find_previous_occurrence(&at, true).ok()?;
                let prev = i64::try_from(prev.timestamp().as_nanosecond()).ok()?;
                (prev >= from).then_some(prev)
            }
        }
    }

    /// What a schedule whose next tick is `next` adds at `now`: nothing before `next`; else the
    /// latest tick due, and with [`Missed::Once`] one job for the missed ticks before it.
    pub(crate) fn due(&self, next: i64, now: i64, missed: Missed) -> Due {
        if next > now {
            return Due { ticks: vec![], next };
        }
        let latest = self.latest(next, now).unwrap_or(next);
        let mut ticks = vec![];
        if missed == Missed::Once
            && let Some(before) = self.latest(next, latest - 1)
        {
            ticks.push(before);
        }
        ticks.push(latest);
        Due { ticks, next: self.after(latest).unwrap_or(i64::MAX) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    /// 2023-11-14T22:13:20Z.
    const T0: i64 = 1_700_000_000 * S;

    #[test]
    fn an_interval_adds_its_latest_tick_and_the_missed_once_if_asked() {
        let t = Ticks::of(&Every::Interval(Duration::from_secs(60))).unwrap();
        assert_eq!(t.due(T0, T0 - 1, Missed::Skip), Due { ticks: vec![], next: T0 });
        assert_eq!(t.due(T0, T0, Missed::Skip), Due { ticks: vec![T0], next: T0 + 60 * S });
        assert_eq!(t.due(T0, T0 + 59 * S, Missed::Once).ticks, [T0], "none missed");
        let late = T0 + 10 * 60 * S + 5 * S;
        assert_eq!(
            t.due(T0, late, Missed::Skip),
            Due { ticks: vec![T0 + 600 * S], next: T0 + 660 * S }
        );
        assert_eq!(t.due(T0, late, Missed::Once).ticks, [T0 + 540 * S, T0 + 600 * S]);
    }

    #[test]
    fn cron_ticks_in_utc_and_in_a_zone() {
        let utc = Ticks::of(&Every::cron("0 3 * * *", None)).unwrap();
        // T0 is 22:13:20 UTC: the next 03:00 UTC is 4 h 46 min 40 s later.
        let next = utc.after(T0).unwrap();
        assert_eq!(next - T0, (4 * 3600 + 46 * 60 + 40) * S);
        let paris = Ticks::of(&Every::cron("0 3 * * *", Some("Europe/Paris"))).unwrap();
        assert_eq!(
            paris.after(T0).unwrap(),
            next - 3600 * S,
            "03:00 in Paris is 02:00 UTC in November"
        );
        let d = utc.due(next, next + 3 * 86_400 * S + S, Missed::Once);
        assert_eq!(d.ticks, [next + 2 * 86_400 * S, next + 3 * 86_400 * S]);
        assert_eq!(d.next, next + 4 * 86_400 * S);
        let seconds = Ticks::of(&Every::cron("*/10 * * * * *", None)).unwrap();
        assert_eq!(seconds.after(T0).unwrap(), T0 + 10 * S);
    }

    #[test]
    fn bad_schedules_are_refused_with_a_reason() {
        for (every, why) in [
            (Every::cron("61 * * * *", None), "does not parse"),
            (Every::cron("* * * *", None), "does not parse"),
            (Every::cron("* * * * *", Some("Nowhere/Town")), "no time zone"),
            (Every::Interval(Duration::from_millis(999)), "shorter"),
        ] {
            let e = Schedule::new("n", every, "l", "").check().unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
        assert!(Schedule::new("", Every::Interval(MIN_INTERVAL), "l", "").check().is_err());
    }
}
