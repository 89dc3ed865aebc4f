//! Per-rule counters exported to Prometheus through the `metrics` facade.
//!
//! Run: `cargo run --example rules_prometheus --features metrics`. It installs the Prometheus
//! recorder (no HTTP listener: a real service would serve `handle.render()` on its `/metrics`
//! route, or enable the exporter's listener), makes a few checks, copies the counts out with
//! `record_metrics`, and prints the exposition text a scrape would get.

use leakgate::{RuleLimiter, Rules};
use metrics_exporter_prometheus::PrometheusBuilder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let handle = PrometheusBuilder::new().install_recorder()?;

    let mut rules = Rules::new();
    rules.insert("api", ["5/s".parse()?]);
    rules.insert("api/beta", ["2/s".parse()?]).shadow(true);
    let lim = RuleLimiter::new(rules);
    for _ in 0..8 {
        let _ = lim.check("api/alice");
        let _ = lim.check("api/beta/bob");
    }

    lim.record_metrics(); // before each scrape
    let text = handle.render();
    print!("{text}");
    assert!(text.contains(r#"leakgate_rule_admitted_total{rule="api"} 5"#));
    assert!(text.contains(r#"leakgate_rule_denied_in_shadow_total{rule="api/beta"} 6"#));
    Ok(())
}
