//! What a run measures: decisions, latencies, and the CPU time of the threads whose names start
//! with a prefix (the service's own, on a runtime of its own).

use std::time::Duration;

/// One scenario's figures.
pub struct Figures {
    pub name: String,
    pub decisions: u64,
    pub admitted: u64,
    pub elapsed: Duration,
    /// Nanoseconds per operation (for pipelines: per batch, the latency each of its commands saw).
    pub latencies: Vec<u64>,
    /// CPU time of the service's threads during the run, when there is a service.
    pub server_cpu: Option<Duration>,
}

impl Figures {
    pub fn per_second(&self) -> f64 {
        self.decisions as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let Some(last) = sorted.len().checked_sub(1) else { return Duration::ZERO };
        Duration::from_nanos(sorted[((last as f64) * p).round() as usize])
    }

    /// One line of the table.
    pub fn row(&self) -> String {
        let cpu = match self.server_cpu {
            Some(cpu) if self.decisions > 0 => {
                let per = cpu.as_nanos() as f64 / self.decisions as f64;
                let share = cpu.as_secs_f64() / self.elapsed.as_secs_f64();
                format!("{per:>7.0} ns  {:>4.0}%", share * 100.0)
            }
            _ => format!("{:>10}  {:>5}", "-", "-"),
        };
        format!(
            "| {:<44} | {:>12.0} | {:>9.1} | {:>9.1} | {} | {:>5.1}% |",
            self.name,
            self.per_second(),
            self.percentile(0.50).as_secs_f64() * 1e6,
            self.percentile(0.99).as_secs_f64() * 1e6,
            cpu,
            100.0 * self.admitted as f64 / self.decisions.max(1) as f64,
        )
    }
}

pub const HEADER: &str = "| scenario (64 concurrent clients)             |  decisions/s |  p50 (µs) |  p99 (µs) | service CPU/decision, share | admitted |\n|---|---:|---:|---:|---:|---:|";

/// CPU time of this process's threads whose name starts with `prefix` (from
/// `/proc/self/task/*/schedstat`, nanoseconds on the CPU).
pub fn thread_cpu(prefix: &str) -> Duration {
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Duration::ZERO };
    for task in tasks.flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !name.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        total += stat.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_nanos(total)
}
