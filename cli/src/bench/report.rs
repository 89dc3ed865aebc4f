//! Printing results: tables for people, JSON (`--json`) for machines.

use super::tail::TailRow;
use super::throughput::{self, Results, Row, GOVERNOR};
use leakgate_baselines::KEYED_CONTENDERS;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The throughput results, as tables or JSON, as text to print. (Writing to a `String` cannot
/// fail: the `fmt::Result`s below are ignored.)
pub(super) fn throughput(
    plan: &throughput::Plan,
    cores: usize,
    results: &Results,
    as_json: bool,
) -> String {
    let mut out = String::new();
    if as_json {
        let rows = |rows: &[Row], names: &[&str]| -> Vec<Value> {
            rows.iter()
                .flat_map(|row| {
                    names.iter().zip(&row.ns).map(move |(name, &ns)| {
                        json!({
                            "scenario": row.scenario,
                            "threads": row.threads,
                            "implementation": name,
                            "ns_per_decision": ns,
                            "mops_per_s": 1e3 / ns,
                            "vs_governor": row.ns[GOVERNOR] / ns,
                        })
                    })
                })
                .collect()
        };
        let doc = json!({
            "kind": "throughput",
            "cores": cores,
            "rounds": plan.rounds,
            "slice_ms": plan.slice.as_millis() as u64,
            "single": rows(&results.single, &throughput::CONTENDERS),
            "keyed": rows(&results.keyed, &KEYED_CONTENDERS),
        });
        let _ = writeln!(out, "{doc:#}");
        return out;
    }
    let _ = writeln!(
        out,
        "leakgate bench: the cost of one rate-limit decision on this machine ({cores} cores).\n\
         Threads share one limiter. 'allowed': every decision admits (and writes the state);\n\
         'denied': one per hour, its unit spent, so every decision refuses (leakgate and governor\n\
         only read). ns/decision is wall time over all decisions of all threads (lower is\n\
         better); the median of {} rounds of {:?} slices, contenders interleaved.\n",
        plan.rounds, plan.slice
    );
    table(&mut out, "scenario", &throughput::CONTENDERS, &results.single);
    let _ = writeln!(
        out,
        "\nkeyed: tracked u64 keys, every check allowed; each thread walks the shared keys in its \
         own scattered order.\n'coarse': both libraries on a clock refreshed every millisecond."
    );
    table(&mut out, "keys", &KEYED_CONTENDERS, &results.keyed);
    let _ = writeln!(out, "\n'vs governor' is throughput relative to governor: above 1 is faster.");
    out
}

fn table(out: &mut String, label: &str, contenders: &[&str], rows: &[Row]) {
    let _ = writeln!(
        out,
        "{label:<12} {:>7}  {:<18} {:>12} {:>9} {:>12}",
        "threads", "implementation", "ns/decision", "Mops/s", "vs governor"
    );
    for row in rows {
        for (who, ns) in contenders.iter().zip(&row.ns) {
            let _ = writeln!(
                out,
                "{:<12} {:>7}  {who:<18} {ns:>12.2} {:>9.1} {:>11.2}x",
                row.scenario,
                row.threads,
                1e3 / ns,
                row.ns[GOVERNOR] / ns
            );
        }
    }
}

/// The per-check latency results, as a table or JSON, as text to print.
pub(super) fn tail(
    plan: &super::tail::Plan,
    cores: usize,
    rows: &[TailRow],
    as_json: bool,
) -> String {
    let mut out = String::new();
    if as_json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|row| {
                json!({
                    "threads": row.threads,
                    "implementation": row.contender,
                    "checks": row.all.count(),
                    "p50_ns": row.all.quantile(0.5),
                    "p99_ns": row.all.quantile(0.99),
                    "p99_99_ns": row.all.quantile(0.9999),
                    "slowest_ns": row.all.max(),
                    "slowest_per_round_ns": row.slowest_per_round,
                })
            })
            .collect();
        let doc = json!({
            "kind": "tail",
            "cores": cores,
            "rounds": plan.rounds,
            "checks_per_thread_per_round": plan.checks,
            "results": rows,
        });
        let _ = writeln!(out, "{doc:#}");
        return out;
    }
    let _ = writeln!(
        out,
        "leakgate bench --tail: the latency of each check on one always-allowing limiter shared by\n\
         all threads ({cores} cores). Every check timed; {} rounds of {} checks per thread,\n\
         contenders interleaved; quantiles over all rounds (within 1.6 %), the slowest exact.\n\
         'timer only' is the cost of the timing itself.\n",
        plan.rounds, plan.checks
    );
    let _ = writeln!(
        out,
        "{:>7}  {:<16} {:>10} {:>10} {:>10} {:>12}   slowest per round",
        "threads", "implementation", "p50", "p99", "p99.99", "slowest"
    );
    for row in rows {
        let per_round: Vec<String> = row.slowest_per_round.iter().map(|&ns| human(ns)).collect();
        let _ = writeln!(
            out,
            "{:>7}  {:<16} {:>10} {:>10} {:>10} {:>12}   {}",
            row.threads,
            row.contender,
            human(row.all.quantile(0.5)),
            human(row.all.quantile(0.99)),
            human(row.all.quantile(0.9999)),
            human(row.all.max()),
            per_round.join(", ")
        );
    }
    out
}

/// Nanoseconds in the largest unit that keeps three significant digits readable.
fn human(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=9_999_999 => format!("{:.1} us", ns as f64 / 1e3),
        10_000_000..=999_999_999 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_units() {
        assert_eq!(human(57), "57 ns");
        assert_eq!(human(12_345), "12.3 us");
        assert_eq!(human(125_000_000), "125.0 ms");
        assert_eq!(human(1_020_000_000), "1.02 s");
        assert_eq!(human(12_000_000_000), "12.00 s");
    }
}
