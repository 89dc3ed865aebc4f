//! The floating-seconds GCRA script (`float_gcra.lua`), for comparison with leakgate's.

use std::time::Duration;

/// The floating-point script, for one quota.
pub struct FloatGcra {
    script: redis::Script,
    count: u64,
    period_s: f64,
    burst: u64,
}

impl FloatGcra {
    pub fn new(count: u64, period: Duration, burst: u64) -> FloatGcra {
        FloatGcra {
            script: redis::Script::new(include_str!("float_gcra.lua")),
            count,
            period_s: period.as_secs_f64(),
            burst,
        }
    }

    fn invocation(&self, key: &str, caller_time: Option<Duration>) -> redis::ScriptInvocation<'_> {
        let mut inv = self.script.prepare_invoke();
        inv.key(key).arg(self.count).arg(self.period_s).arg(self.burst).arg(1);
        if let Some(t) = caller_time {
            // An hour of real time for the key to live beyond the simulated clock's moment.
            inv.arg(t.as_secs()).arg(t.subsec_micros()).arg(3_600_000);
        }
        inv
    }

    /// One unit at `caller_time` (or Redis TIME): `Ok(())` or `Err(retry_after)`.
    pub fn check(
        &self,
        con: &mut redis::Connection,
        key: &str,
        caller_time: Option<Duration>,
    ) -> Result<(), Duration> {
        let (allowed, retry): (u8, String) = self.invocation(key, caller_time).invoke(con).unwrap();
        decode(allowed, &retry)
    }

    /// The same, from async code.
    pub async fn check_async(
        &self,
        con: &mut redis::aio::MultiplexedConnection,
        key: &str,
    ) -> Result<(), Duration> {
        let (allowed, retry): (u8, String) =
            self.invocation(key, None).invoke_async(con).await.unwrap();
        decode(allowed, &retry)
    }
}

fn decode(allowed: u8, retry: &str) -> Result<(), Duration> {
    if allowed == 1 {
        Ok(())
    } else {
        Err(Duration::from_secs_f64(retry.parse::<f64>().unwrap().max(0.0)))
    }
}
