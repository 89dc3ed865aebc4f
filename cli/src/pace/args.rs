//! The command line of `leakgate pace`.

use leakgate::Quota;
use std::time::Duration;

pub(super) const USAGE: &str = "\
usage: leakgate pace RATE [--burst B] [--max-wait D] [--drop]
  RATE            lines per period: 1/s, 100/min, 3/1500ms, 5/s burst 2 (burst 1 unless given)
  --burst B       let up to B lines go at once after a pause (default 1: evenly spaced)
  --max-wait D    drop a line that would wait longer than D after it is read (30s, 1.5s, 250ms;
                  units ns, us, ms, s, min, h; default: never drop)
  --drop          meter mode: pass a line only if it conforms when read, drop the rest at once";

/// What `leakgate pace` was asked to do.
#[derive(Debug)]
pub(super) struct Options {
    pub(super) quota: Quota,
    pub(super) max_wait: Duration,
    pub(super) meter: bool,
}

/// The options, `None` for `--help`, or a message saying what is wrong.
pub(super) fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut rate = None;
    let mut burst = None;
    let mut max_wait = Duration::MAX;
    let mut meter = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        // `--flag=value` and `--flag value` alike.
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline.clone().or_else(|| it.next().cloned()).ok_or(format!("{name} needs a value"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "--burst" => {
                let b = value("--burst")?;
                let b = b.parse::<u64>().map_err(|_| format!("bad --burst {b:?}: not a count"))?;
                burst = Some(b);
            }
            "--max-wait" => max_wait = parse_duration(&value("--max-wait")?)?,
            "--drop" if inline.is_none() => meter = true,
            flag if flag.starts_with('-') && flag.len() > 1 => {
                return Err(format!("unknown option {arg:?}"))
            }
            _ if rate.is_none() => rate = Some(arg.clone()),
            _ => return Err(format!("unexpected argument {arg:?} (RATE is already {rate:?})")),
        }
    }
    let rate = rate.ok_or("missing RATE (e.g. 1/s)")?;
    let quota: Quota = rate.parse().map_err(|e| format!("bad RATE {rate:?}: {e}"))?;
    // A rate alone paces evenly (burst 1) unless it names its own burst or --burst is given.
    let named = rate.to_ascii_lowercase().contains("burst");
    let burst = burst.unwrap_or(if named { quota.burst() } else { 1 });
    let quota = quota.with_burst(burst).map_err(|e| format!("bad --burst {burst}: {e}"))?;
    Ok(Some(Options { quota, max_wait, meter }))
}

/// `NUMBER[.FRACTION]UNIT`, UNIT one of ns, us, ms, s, min, h; exact (no floating point).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("bad duration {text:?}: {why}");
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let ns_per: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => return Err(bad("needs a unit: ns, us, ms, s, min or h")),
        _ => return Err(bad("the unit must be ns, us, ms, s, min or h")),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad("expected a number such as 30s or 1.5s"));
    }
    let digits = |s: &str| if s.is_empty() { Some(0) } else { s.parse::<u128>().ok() };
    let (Some(w), Some(f)) = (digits(whole), digits(fraction)) else {
        return Err(bad("too long"));
    };
    let scale = 10u128.checked_pow(fraction.len() as u32).ok_or_else(|| bad("too precise"))?;
    let ns = w
        .checked_mul(ns_per)
        .and_then(|ns| ns.checked_add(f.checked_mul(ns_per)? / scale))
        .and_then(|ns| u64::try_from(ns).ok())
        .ok_or_else(|| bad("too long"))?;
    Ok(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(".25ms"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7us"), Ok(Duration::from_micros(7)));
        for bad in ["", "s", "10", "1.2.3s", "5 s", "5sec", "-1s", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn burst_defaults_to_one_unless_named() {
        let o = parse(&args(&["10/s"])).unwrap().unwrap();
        assert_eq!((o.quota.count(), o.quota.burst(), o.meter), (10, 1, false));
        assert_eq!(o.max_wait, Duration::MAX);
        let o = parse(&args(&["10/s burst 4"])).unwrap().unwrap();
        assert_eq!(o.quota.burst(), 4);
        let o =
            parse(&args(&["--burst=3", "10/s", "--max-wait", "2s", "--drop"])).unwrap().unwrap();
        assert_eq!((o.quota.burst(), o.max_wait, o.meter), (3, Duration::from_secs(2), true));
    }

    #[test]
    fn help_and_errors() {
        assert!(parse(&args(&["--help"])).unwrap().is_none());
        assert!(parse(&args(&[])).unwrap_err().contains("missing RATE"));
        assert!(parse(&args(&["10/s", "--burst"])).unwrap_err().contains("needs a value"));
        assert!(parse(&args(&["10/s", "--drop=yes"])).unwrap_err().contains("unknown option"));
        assert!(parse(&args(&["10/s", "5/s"])).unwrap_err().contains("unexpected argument"));
        assert!(parse(&args(&["ten/s"])).unwrap_err().starts_with("bad RATE \"ten/s\""));
    }
}
