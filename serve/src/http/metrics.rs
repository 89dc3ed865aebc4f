//! `GET /metrics`: Prometheus text (exposition format 0.0.4).
//!
//! * per rule (the rules file's, the overrides', and `cl.throttle` for every `CL.THROTTLE`
//!   bucket):
//!   `leakgate_rule_admitted_total`, `leakgate_rule_refused_total`,
//!   `leakgate_rule_shadow_refused_total` (requests a shadow rule would have refused),
//!   `leakgate_rule_errors_total` (checks the failure policy answered because Redis gave none);
//!   with `--redis`, the first three count the decisions Redis made;
//! * per listener: `leakgate_requests_total`, `leakgate_request_errors_total` and the histogram
//!   `leakgate_request_duration_seconds` (time spent deciding, not on the wire);
//! * `leakgate_rules_reloads_total{outcome="applied"|"refused"}` and `leakgate_rules_in_force`;
//! * `leakgate_key_memory_bytes`, `leakgate_key_memory_limit_bytes` (the bytes client-made keys
//!   take, and their bound) and `leakgate_keys_refused_total` (new keys refused for want of room).

use crate::limits::Limits;
use crate::metrics::{ExtraCounts, Listener, ListenerSnapshot, LATENCY_BOUNDS_NS};
use leakgate::Clock;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// A label value with `\`, `"` and line feeds escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Everything, as Prometheus text.
pub(crate) fn render<C: Clock + 'static>(limits: &Limits<C>) -> String {
    // Writing to a String cannot fail: every `write!` result below is ignored for that reason.
    let mut out = String::with_capacity(4096);
    #[derive(Default)]
    struct Row {
        admitted: u64,
        refused: u64,
        shadow: u64,
        errors: u64,
    }
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let extras: BTreeMap<String, ExtraCounts> = limits.metrics.rules().into_iter().collect();
    for stats in limits.rules.stats() {
        let internal = extras.get(&stats.rule).map_or(0, |e| e.internal_peeks);
        rows.insert(
            stats.rule,
            Row {
                admitted: stats.admitted.saturating_sub(internal),
                refused: stats.denied,
                shadow: stats.denied_in_shadow,
                errors: 0,
            },
        );
    }
    // Errors of every rule, and the decisions on buckets kept outside the rules limiter
    // (`cl.throttle`, overrides in memory).
    for (path, extra) in &extras {
        let row = rows.entry(path.clone()).or_default();
        row.errors = extra.errors;
        row.admitted += extra.admitted;
        row.refused += extra.refused;
    }
    type Value = fn(&Row) -> u64;
    let rule_families: [(&str, &str, Value); 4] = [
        ("leakgate_rule_admitted_total", "Requests the rule's buckets admitted.", |r| r.admitted),
        ("leakgate_rule_refused_total", "Requests refused because of the rule.", |r| r.refused),
        (
            "leakgate_rule_shadow_refused_total",
            "Requests the rule, in shadow mode, would have refused.",
            |r| r.shadow,
        ),
        (
            "leakgate_rule_errors_total",
            "Checks on the rule that Redis did not decide (the failure policy answered).",
            |r| r.errors,
        ),
    ];
    for (name, help, value) in rule_families {
        family(&mut out, name, "counter", help);
        for (path, row) in &rows {
            let _ = writeln!(out, "{name}{{rule=\"{}\"}} {}", label(path), value(row));
        }
    }
    let snapshots: Vec<_> =
        Listener::ALL.iter().map(|&l| (l.name(), limits.metrics.listener(l).snapshot())).collect();
    type Count = fn(&ListenerSnapshot) -> u64;
    let listener_families: [(&str, &str, Count); 2] = [
        ("leakgate_requests_total", "Requests (RESP: commands) per listener.", |s| s.requests),
        ("leakgate_request_errors_total", "Requests answered with an error.", |s| s.errors),
    ];
    for (name, help, value) in listener_families {
        family(&mut out, name, "counter", help);
        for (listener, s) in &snapshots {
            let _ = writeln!(out, "{name}{{listener=\"{listener}\"}} {}", value(s));
        }
    }
    family(
        &mut out,
        "leakgate_request_duration_seconds",
        "histogram",
        "Time from a request read to its answer ready, per listener.",
    );
    for (name, s) in &snapshots {
        for (bound, count) in LATENCY_BOUNDS_NS.iter().zip(&s.cumulative) {
            let le = *bound as f64 / 1e9;
            let _ = writeln!(out, "leakgate_request_duration_seconds_bucket{{listener=\"{name}\",le=\"{le}\"}} {count}");
        }
        let total = s.cumulative.last().copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "leakgate_request_duration_seconds_bucket{{listener=\"{name}\",le=\"+Inf\"}} {total}"
        );
        let _ = writeln!(
            out,
            "leakgate_request_duration_seconds_sum{{listener=\"{name}\"}} {}",
            s.sum_ns as f64 / 1e9
        );
        let _ =
            writeln!(out, "leakgate_request_duration_seconds_count{{listener=\"{name}\"}} {total}");
    }
    family(
        &mut out,
        "leakgate_rules_reloads_total",
        "counter",
        "Rules loaded, or refused, since start.",
    );
    let reloads = &limits.metrics.reloads;
    // Relaxed: statistics.
    let _ = writeln!(
        out,
        "leakgate_rules_reloads_total{{outcome=\"applied\"}} {}",
        reloads.applied.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "leakgate_rules_reloads_total{{outcome=\"refused\"}} {}",
        reloads.rejected.load(Ordering::Relaxed)
    );
    family(&mut out, "leakgate_rules_in_force", "gauge", "Rules in force (overrides included).");
    let _ = writeln!(out, "leakgate_rules_in_force {}", limits.in_force().rules.len());
    let budget = &limits.budget;
    family(
        &mut out,
        "leakgate_key_memory_bytes",
        "gauge",
        "Bytes the keys clients made (CL.THROTTLE, descriptor overrides) take now.",
    );
    let _ = writeln!(out, "leakgate_key_memory_bytes {}", budget.used());
    family(&mut out, "leakgate_key_memory_limit_bytes", "gauge", "The bound on those bytes.");
    let _ = writeln!(out, "leakgate_key_memory_limit_bytes {}", budget.limit());
    family(
        &mut out,
        "leakgate_keys_refused_total",
        "counter",
        "New keys refused because the key memory was full.",
    );
    let _ = writeln!(out, "leakgate_keys_refused_total {}", budget.refused());
    out
}
