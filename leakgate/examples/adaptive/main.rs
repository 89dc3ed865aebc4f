//! Plots AIMD and Gradient2 against a simulated server whose capacity halves, doubles and fails
//! (see `sim.rs`), into `docs/adaptive.svg`: `cargo run -p leakgate --example adaptive [path]`.

mod sim;

use leakgate::{AdaptiveConcurrency, ManualClock};
use plotters::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "docs/adaptive.svg".to_string());
    let aimd = sim::run(&AdaptiveConcurrency::aimd_with_clock(1, 10, 200, ManualClock::new())?);
    let gradient2 =
        sim::run(&AdaptiveConcurrency::gradient2_with_clock(1, 10, 200, ManualClock::new())?);

    let root = SVGBackend::new(&path, (900, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Adaptive concurrency against a server's capacity", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(44)
        .build_cartesian_2d(0u32..sim::ROUNDS, 0u32..140u32)?;
    chart.configure_mesh().x_desc("round trip").y_desc("calls in flight").draw()?;
    let series = [
        ("server capacity", &BLACK, aimd.iter().map(|r| (r.round, r.capacity)).collect::<Vec<_>>()),
        ("AIMD limit", &BLUE, aimd.iter().map(|r| (r.round, r.limit)).collect()),
        ("Gradient2 limit", &RED, gradient2.iter().map(|r| (r.round, r.limit)).collect()),
    ];
    for (name, colour, points) in series {
        let colour = *colour;
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    root.present()?;
    println!("wrote {path}");
    Ok(())
}
