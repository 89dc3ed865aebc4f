//! Per-rule counters through the `metrics` facade, read back from a real Prometheus recorder.
#![cfg(feature = "metrics")]

use leakgate::{ManualClock, RuleLimiter, Rules};
use metrics_exporter_prometheus::PrometheusBuilder;

#[test]
fn counters_reach_a_prometheus_recorder() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let mut rules = Rules::new();
    rules.insert("api", ["3/s".parse().unwrap()]);
    rules.insert("api/beta", ["1/s".parse().unwrap()]).shadow(true);
    let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    for _ in 0..5 {
        let _ = lim.check("api/alice");
        assert!(lim.check("api/beta/bob").is_ok());
    }
    metrics::with_local_recorder(&recorder, || lim.record_metrics());
    let text = handle.render();
    for line in [
        r#"leakgate_rule_admitted_total{rule="api"} 3"#,
        r#"leakgate_rule_denied_total{rule="api"} 2"#,
        r#"leakgate_rule_admitted_total{rule="api/beta"} 1"#,
        r#"leakgate_rule_denied_in_shadow_total{rule="api/beta"} 4"#,
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    // Recording again sets the totals, it does not add them twice.
    let _ = lim.check("api/carol");
    metrics::with_local_recorder(&recorder, || lim.record_metrics());
    assert!(handle.render().contains(r#"leakgate_rule_admitted_total{rule="api"} 4"#));
}
