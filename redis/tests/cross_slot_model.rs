//! Cross-slot calls, phase by phase, against the exact model: the real script on a real
//! `redis-server`, driven one phase at a time so that several cross-slot requests (reserve on
//! each key, then commit or release on each) interleave with single-key checks in every order
//! proptest finds, on a manual clock. Some callers die after reserving (their holds expire at
//! once and are committed by the next script on the key).
//!
//! Checked (see `connection/cross_slot.rs`):
//! - every admitted request is admitted by the exact model fed the admitted requests in order,
//!   each linearized at its check (a cross-slot one at its reserve on each key): never more;
//! - each key's final TAT is at least that model's, and at most the TAT with every committed
//!   hold charged at the time it was committed (so a refused request left no charge, unless its
//!   caller died).
//!
//! Each case runs on plain buckets or on rule buckets (`ARGV[9]` "1"). On rule buckets every key
//! starts with units charged at the start under two forms the script must take in: its own
//! bucket kept in other units (D = 2: carried over to the call's quota at its first read) and an
//! origin (the key under an earlier rule's path, unmarked: taken in, the fuller of the two kept,
//! and a marked copy written back there, which must hold no hold). The model starts each key
//! with the larger of the two charges.
//!
//! The script's arguments are built here as `gcra.lua` documents them, for one quota whose
//! interval is a whole number of ns (units of 1 ns: D = 1).

mod support;

use proptest::prelude::*;
use support::model::{Decision, Model};
use support::RedisServer;

const T_NS: u64 = 100_000_000; // 10/s
const BURST: u64 = 4;
const START_NS: u64 = 1_700_000_000_000_000_000;
const KEYS: [&str; 3] = ["xa", "xb", "xc"];
/// Never expires (2^53 - 1 µs).
const NEVER: u64 = (1 << 53) - 1;

fn source() -> String {
    [
        include_str!("../src/script/gcra.lua"),
        include_str!("../src/script/gcra_carry.lua"),
        include_str!("../src/script/gcra_general.lua"),
    ]
    .concat()
}

/// Key `key`'s origin (rule buckets only).
fn origin(key: &str) -> String {
    format!("{key}@old")
}

/// The quota as a rule bucket names it, in units of 1/`d` ns.
fn rule_quota(d: u64) -> String {
    let l = d * 1_000_000;
    let (t, tau) = (T_NS * d, BURST * T_NS * d);
    format!("{d}:{}:{}:{}:{}", t / l, t % l, tau / l, tau % l)
}

/// One script call on `key` at `t` ns: `op` "1" check, "0" peek, "r"/"c"/"x" a phase of call `id`;
/// on rule buckets (with the key's origin) if `rules`.
#[allow(clippy::too_many_arguments)]
fn run(
    con: &mut redis::Connection,
    rules: bool,
    key: &str,
    t: u64,
    n: u64,
    op: &str,
    id: &str,
    exp: u64,
) -> bool {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(source());
    if rules {
        cmd.arg(2).arg(key).arg(origin(key));
    } else {
        cmd.arg(1).arg(key);
    }
    cmd.arg(t / 1_000_000).arg(t % 1_000_000).arg(1).arg(0).arg(0).arg(0).arg(3_600_000);
    cmd.arg(op).arg(if rules { "1" } else { "0" }).arg(NEVER);
    cmd.arg(1).arg(1_000_000).arg(T_NS / 1_000_000).arg(0).arg(BURST * T_NS / 1_000_000).arg(0);
    cmd.arg(0).arg(1).arg(1).arg(n * T_NS / 1_000_000).arg(0);
    if rules {
        // One origin, whose rule had one quota.
        cmd.arg(1).arg(1);
    }
    if op != "1" && op != "0" {
        cmd.arg(id).arg(exp);
    }
    let reply: Vec<i64> = cmd.query(con).expect("the script answers");
    reply[0] & 1 == 1
}

/// The stored TAT of `key` in ns (0: none), and whether holds are left on it.
fn stored(con: &mut redis::Connection, key: &str) -> (u64, bool) {
    let raw: Option<String> = redis::cmd("GET").arg(key).query(con).unwrap();
    let Some(raw) = raw else { return (0, false) };
    let buckets = raw.split(';').next().unwrap();
    let (ms, lo) = buckets.trim_start_matches('~').split_once(':').unwrap();
    let lo = lo.split('@').next().unwrap();
    (ms.parse::<u64>().unwrap() * 1_000_000 + lo.parse::<u64>().unwrap(), raw.contains(';'))
}

/// Rule buckets charged with `own` units at the start in units of 1/2 ns (carried over at the
/// first read) and `old` units at the origin (taken in); the charge the model starts with.
fn seed(con: &mut redis::Connection, key: &str, own: u64, old: u64) -> u64 {
    let value = |units: u64, d: u64| {
        let tat = (START_NS + units * T_NS) * d;
        let l = d * 1_000_000;
        format!("{}:{}@{}", tat / l, tat % l, rule_quota(d))
    };
    let set = |con: &mut redis::Connection, k: &str, v: String| {
        redis::cmd("SET").arg(k).arg(v).query::<()>(con).unwrap();
    };
    if own > 0 {
        set(con, key, value(own, 2));
    }
    if old > 0 {
        set(con, &origin(key), value(old, 1));
    }
    own.max(old)
}

#[derive(Clone, Debug)]
enum Act {
    Advance(u64),
    Single(usize, u64),
    Begin { pair: usize, n: u64, dies: bool },
    Step(usize),
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (0u64..250_000_000).prop_map(Act::Advance),
        (0usize..3, 1u64..3).prop_map(|(k, n)| Act::Single(k, n)),
        (0usize..3, 1u64..4, proptest::bool::weighted(0.2))
            .prop_map(|(pair, n, dies)| Act::Begin { pair, n, dies }),
        (0usize..8).prop_map(Act::Step),
        (0usize..8).prop_map(Act::Step),
    ]
}

/// A cross-slot request in flight: its keys, cost, and the steps done.
struct Pending {
    id: String,
    keys: [usize; 2],
    n: u64,
    dies: bool,
    /// Each key's reserve: (event, time, granted).
    reserved: Vec<(usize, u64, bool)>,
    /// Phase 2 steps done.
    second: usize,
}

/// A charge of `n` at `t` on `key`, applied at `event` (for the models).
#[derive(Clone, Copy)]
struct Charge {
    event: usize,
    key: usize,
    t: u64,
    n: u64,
}

struct World {
    con: redis::Connection,
    /// Rule buckets (with origins) instead of plain ones.
    rules: bool,
    now: u64,
    event: usize,
    /// Admitted requests' charges at their linearization (the exact model's input).
    lin: Vec<Charge>,
    /// Every charge at the time it was applied (checks, commits): the upper bound.
    late: Vec<Charge>,
    /// Admissions the real script made, as (key charges), for the admissibility check.
    admitted: Vec<Vec<usize>>,
    /// Holds of dead callers per key: (n), committed at the key's next touch.
    dead: [Vec<u64>; 3],
}

impl World {
    fn touch(&mut self, key: usize) {
        // A script on `key` now commits the dead callers' holds on it, at this time.
        for n in std::mem::take(&mut self.dead[key]) {
            self.late.push(Charge { event: self.event, key, t: self.now, n });
        }
    }

    fn step(&mut self, p: &mut Pending) -> bool {
        self.event += 1;
        if p.reserved.len() < 2 {
            let key = p.keys[p.reserved.len()];
            let exp = if p.dies { 1 } else { NEVER };
            self.touch(key);
            let ok = run(&mut self.con, self.rules, KEYS[key], self.now, p.n, "r", &p.id, exp);
            p.reserved.push((self.event, self.now, ok));
            if ok && p.dies {
                self.dead[key].push(p.n);
            }
            if p.reserved.len() == 2 && p.reserved.iter().all(|r| r.2) {
                let ids = p.reserved.iter().zip(p.keys).map(|(r, k)| (r.0, r.1, k));
                for (event, t, key) in ids {
                    self.lin.push(Charge { event, key, t, n: p.n });
                }
                self.admitted.push(p.keys.to_vec());
            }
            return p.reserved.len() == 2 && p.dies;
        }
        let all = p.reserved.iter().all(|r| r.2);
        let (key, granted) = (p.keys[p.second], p.reserved[p.second].2);
        p.second += 1;
        if granted {
            self.touch(key);
            let op = if all { "c" } else { "x" };
            run(&mut self.con, self.rules, KEYS[key], self.now, 0, op, &p.id, 0);
            if all {
                self.late.push(Charge { event: self.event, key, t: self.now, n: p.n });
            }
        }
        p.second == 2
    }
}

/// The exact model's TATs over `charges` in event order; panics if the model refuses one of the
/// admitted requests' charges.
fn tats(charges: &mut [Charge], check: bool) -> [u64; 3] {
    charges.sort_by_key(|c| c.event);
    let quota: leakgate::Quota = format!("10/s burst {BURST}").parse().unwrap();
    let mut model = Model::new(vec![quota]);
    let mut tat = [0u64; 3];
    for c in charges.iter() {
        let decision = model.request(&[KEYS[c.key].as_bytes()], c.n, c.t, 0);
        if check {
            assert!(matches!(decision, Decision::Admitted { .. }), "over-admitted at {}", c.event);
        }
        tat[c.key] = tat[c.key].max(c.t) + c.n * T_NS;
    }
    tat
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn interleaved_cross_slot_calls_never_admit_beyond_the_exact_model(
        acts in proptest::collection::vec(act(), 1..60),
        rules in proptest::bool::ANY,
        seeds in proptest::array::uniform3((0..=BURST, 0..=BURST)),
    ) {
        let server = RedisServer::start();
        let mut con = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
        let mut lin = vec![];
        if rules {
            for (key, (own, old)) in seeds.into_iter().enumerate() {
                let n = seed(&mut con, KEYS[key], own, old);
                if n > 0 {
                    lin.push(Charge { event: 0, key, t: START_NS, n });
                }
            }
        }
        let late = lin.clone();
        let mut w = World { con, rules, now: START_NS, event: 0, lin, late, admitted: vec![], dead: Default::default() };
        let mut pending: Vec<Pending> = Vec::new();
        let mut next_id = 0u64;
        for a in acts {
            match a {
                Act::Advance(dt) => w.now += dt,
                Act::Single(key, n) => {
                    w.event += 1;
                    w.touch(key);
                    if run(&mut w.con, rules, KEYS[key], w.now, n, "1", "", 0) {
                        w.lin.push(Charge { event: w.event, key, t: w.now, n });
                        w.late.push(Charge { event: w.event, key, t: w.now, n });
                    }
                }
                Act::Begin { pair, n, dies } => {
                    next_id += 1;
                    let keys = [pair, (pair + 1) % 3];
                    let id = format!("{next_id:032x}");
                    let mut p = Pending { id, keys, n, dies, reserved: vec![], second: 0 };
                    if !w.step(&mut p) {
                        pending.push(p);
                    }
                }
                Act::Step(i) if !pending.is_empty() => {
                    let i = i % pending.len();
                    let mut p = pending.swap_remove(i);
                    if !w.step(&mut p) {
                        pending.push(p);
                    }
                }
                Act::Step(_) => {}
            }
        }
        for mut p in pending {
            while !w.step(&mut p) {}
        }
        // A peek on every key commits what dead callers left.
        for (key, name) in KEYS.iter().enumerate() {
            w.event += 1;
            w.touch(key);
            run(&mut w.con, rules, name, w.now, 0, "0", "", 0);
        }
        let low = tats(&mut w.lin, true);
        let high = tats(&mut w.late, false);
        for (key, name) in KEYS.iter().enumerate() {
            let (tat, holds) = stored(&mut w.con, name);
            prop_assert!(!holds, "holds left on {name}");
            if rules {
                prop_assert!(!stored(&mut w.con, &origin(name)).1, "holds copied to {name}'s origin");
            }
            // A TAT at or before now is an empty bucket, whatever its value: compare from now.
            let (tat, low, high) = (tat.max(w.now), low[key].max(w.now), high[key].max(w.now));
            prop_assert!(low <= tat && tat <= high, "key {key}: {low} <= {tat} <= {high}");
        }
    }
}

/// A rule bucket of `units` charged at the start, in units of 1/`d` ns, then `holds` (each
/// `(id, units)`, held at the start, never expiring), with costs in the same units.
fn held(units: u64, d: u64, holds: &[(&str, u64)]) -> String {
    let l = d * 1_000_000;
    let tat = (START_NS + units * T_NS) * d;
    let mut value = format!("{}:{}@{}", tat / l, tat % l, rule_quota(d));
    for (id, n) in holds {
        let c = n * T_NS * d;
        let t = START_NS;
        value += &format!(";{id}/{}/{}/{NEVER}/{}/{}", t / 1_000_000, t % 1_000_000, c / l, c % l);
    }
    value
}

#[test]
fn holds_on_a_rule_key_whose_quota_changed_are_committed_and_an_origins_holds_count() {
    let server = RedisServer::start();
    let mut con = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let set = |con: &mut redis::Connection, k: &str, v: String| {
        redis::cmd("SET").arg(k).arg(v).query::<()>(con).unwrap();
    };
    let get = |con: &mut redis::Connection, k: &str| -> String {
        redis::cmd("GET").arg(k).query(con).unwrap()
    };
    let (a, b) = ("0000000000000000000000000000000a", "0000000000000000000000000000000b");
    // A key kept in other units (as after a reload) with a live hold of 3 units: the hold is
    // committed before the carry-over, so one unit is left, and a release after it leaves the
    // charge (against the caller: never more admitted).
    set(&mut con, "ya", held(0, 2, &[(a, 3)]));
    assert!(run(&mut con, true, "ya", START_NS, 1, "1", "", 0), "3 held + 1 <= burst 4");
    assert!(!run(&mut con, true, "ya", START_NS, 1, "1", "", 0), "the held units were charged");
    run(&mut con, true, "ya", START_NS, 0, "x", a, 0);
    assert_eq!(stored(&mut con, "ya"), (START_NS + 4 * T_NS, false));
    // The caller's own release there drops its hold: nothing charged.
    set(&mut con, "yb", held(1, 2, &[(a, 2), (b, 1)]));
    run(&mut con, true, "yb", START_NS, 0, "x", b, 0);
    assert_eq!(stored(&mut con, "yb"), (START_NS + 3 * T_NS, false));
    // Holds on an origin (a server still on the old rules) count here as charged, and stay
    // there for that server, behind the marked copy.
    set(&mut con, &origin("yc"), held(1, 1, &[(a, 2)]));
    assert!(!run(&mut con, true, "yc", START_NS, 2, "1", "", 0), "1 + 2 held + 2 > 4");
    assert!(run(&mut con, true, "yc", START_NS, 1, "1", "", 0), "counted once, not at each read");
    assert!(!run(&mut con, true, "yc", START_NS, 1, "1", "", 0));
    let copy = get(&mut con, &origin("yc"));
    assert!(
        copy.starts_with('~') && copy.ends_with(&held(0, 1, &[(a, 2)])[held(0, 1, &[]).len()..]),
        "{copy}"
    );
}
