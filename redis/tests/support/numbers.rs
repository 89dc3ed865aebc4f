//! What the `*_numbers` examples share to print their measurements: the Redis CPU time the
//! nodes have used, and medians of rounds.

/// The CPU time the nodes on `ports` have used so far, summed (`INFO cpu`: user + system, main
/// thread and children), in seconds.
pub fn cpu_secs(ports: &[u16]) -> f64 {
    ports.iter().map(|&port| node_cpu_secs(port)).sum()
}

fn node_cpu_secs(port: u16) -> f64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("cpu").query(&mut con).unwrap();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// The median of `v` (the upper middle one for an even count); sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The rounds' values as whole numbers, for printing.
pub fn rounded(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| *x as u64).collect()
}
