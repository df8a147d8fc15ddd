//! The pure part of the simulator: a seeded random number generator, the
//! behaviour mix, names and fingerprints, and every client's schedule.
//!
//! Everything here is a function of (clients, duration, seed), so a run can be
//! repeated with `--seed`. What the network and the server do with the plan
//! (who wins the last seat, when the keeper's jittered heartbeats land) is not.

use std::fmt;
use std::time::Duration;

/// SplitMix64: small, fast, and stable across versions of any crate (the
/// plan for a seed must not change when a dependency is upgraded).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)` (or `lo` when the range is empty).
    pub fn range_f64(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            lo
        } else {
            lo + (hi - lo) * self.unit()
        }
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A fraction `[lo, hi)` of `d`.
    pub fn part_of(&mut self, d: Duration, lo: f64, hi: f64) -> Duration {
        d.mul_f64(self.range_f64(lo, hi))
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// How a simulated client behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Behaviour {
    /// Checks out early and holds the seat for the whole run (LeaseKeeper).
    Steady,
    /// Works a while, releases, comes back later (LeaseKeeper, one per
    /// session). Gets denied (409) when the pool is full.
    Releaser,
    /// Checks out, heartbeats a while, then stops without releasing: the
    /// seat is reaped after its TTL + reap grace (or revoked by an admin).
    Crasher,
    /// Holds a seat with LeaseKeeper through a network that drops out now
    /// and then: short outages it rides out, sometimes one that lapses it.
    Flaky,
    /// Arrives mid-run and waits in line with `?wait=` for a seat.
    Late,
    /// A laptop that borrows its seat for a few minutes (no heartbeats),
    /// comes back early and returns it (the typed client).
    Borrower,
    /// Works a while with a LeaseKeeper that reports the user's activity,
    /// then leaves the application open and walks away: its heartbeats
    /// report a growing `idle_s` until the server reclaims the seat. Never
    /// comes back. Only on a license with an `idle_timeout`.
    Idle,
    /// Like `Idle`, but comes back: after the reclaim (its keeper checks
    /// out again) when the run leaves time for it, else before the timeout
    /// (the same seat, kept). Only on a license with an `idle_timeout`.
    Returner,
}

impl Behaviour {
    pub const ALL: [Behaviour; 8] = [
        Behaviour::Steady,
        Behaviour::Releaser,
        Behaviour::Crasher,
        Behaviour::Flaky,
        Behaviour::Late,
        Behaviour::Borrower,
        Behaviour::Idle,
        Behaviour::Returner,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Behaviour::Steady => "steady",
            Behaviour::Releaser => "releaser",
            Behaviour::Crasher => "crasher",
            Behaviour::Flaky => "flaky",
            Behaviour::Late => "late",
            Behaviour::Borrower => "borrower",
            Behaviour::Idle => "idle",
            Behaviour::Returner => "returner",
        }
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many clients of each behaviour for `n` clients: every behaviour at
/// least once from five clients on, releasers take the rest. Below five, a
/// seeded pick that always starts with a crasher (the reap is what a
/// newcomer most needs to see).
pub fn mix(n: usize, rng: &mut Rng) -> Vec<Behaviour> {
    if n == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n);
    // Six: the behaviours `mix` draws, plus the releaser `plan` may turn
    // into the borrower (idle ones are turned later, only with a timeout).
    if n < 6 {
        let mut rest = vec![
            Behaviour::Steady,
            Behaviour::Releaser,
            Behaviour::Flaky,
            Behaviour::Late,
        ];
        rng.shuffle(&mut rest);
        out.push(Behaviour::Crasher);
        out.extend(rest.into_iter().take(n - 1));
    } else {
        let count = |div: usize| (n / div).max(1);
        let fixed = [
            (Behaviour::Steady, count(5)),
            (Behaviour::Crasher, count(8)),
            (Behaviour::Flaky, count(6)),
            (Behaviour::Late, count(6)),
        ];
        for (b, k) in fixed {
            out.extend(std::iter::repeat_n(b, k));
        }
        let releasers = n.saturating_sub(out.len()).max(1);
        out.extend(std::iter::repeat_n(Behaviour::Releaser, releasers));
        out.truncate(n);
    }
    out
}

const FIRST: &[&str] = &[
    "Ada",
    "Grace",
    "Alan",
    "Barbara",
    "Edsger",
    "Frances",
    "Ken",
    "Margaret",
    "Dennis",
    "Radia",
    "Donald",
    "Hedy",
    "Linus",
    "Katherine",
    "John",
    "Sophie",
    "Tim",
    "Annie",
    "Niklaus",
    "Karen",
    "Guido",
    "Lynn",
    "Bjarne",
    "Mary",
    "Leslie",
    "Adele",
    "Brian",
    "Jean",
    "Fran",
    "Joan",
    "Yukihiro",
    "Shafi",
    "Rob",
    "Evelyn",
    "Butler",
    "Anita",
    "Whitfield",
    "Carol",
    "Vint",
    "Ida",
];

const LAST: &[&str] = &[
    "Lovelace",
    "Hopper",
    "Turing",
    "Liskov",
    "Dijkstra",
    "Allen",
    "Thompson",
    "Hamilton",
    "Ritchie",
    "Perlman",
    "Knuth",
    "Lamarr",
    "Torvalds",
    "Johnson",
    "Backus",
    "Wilson",
    "Berners-Lee",
    "Easley",
    "Wirth",
    "Sparck Jones",
    "van Rossum",
    "Conway",
    "Stroustrup",
    "Keller",
    "Lamport",
    "Goldberg",
    "Kernighan",
    "Sammet",
    "Bilas",
    "Clarke",
    "Matsumoto",
    "Goldwasser",
    "Pike",
    "Boyd",
    "Lampson",
    "Borg",
    "Diffie",
    "Shaw",
    "Cerf",
    "Rhodes",
];

/// A holder name and machine fingerprint for client `index`: people on
/// workstations (`Grace Hopper`, `wks-grace-4f1c`) and, for some, CI jobs
/// (`ci-runner-07`, `ci-host-07-…`). Unique within a plan.
pub fn identity(index: usize, ci: bool, rng: &mut Rng) -> (String, String) {
    let tag = rng.next_u64() & 0xffff;
    if ci {
        let n = index + 1;
        (
            format!("ci-runner-{n:02}"),
            format!("ci-host-{n:02}-{tag:04x}"),
        )
    } else {
        let first = FIRST[(index + rng.below(FIRST.len())) % FIRST.len()];
        let last = LAST[rng.below(LAST.len())];
        let holder = format!("{first} {last}");
        let fp = format!("wks-{}-{tag:04x}", first.to_lowercase());
        (holder, fp)
    }
}

/// One simulated client's part in the run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPlan {
    pub index: usize,
    pub behaviour: Behaviour,
    pub holder: String,
    pub fingerprint: String,
    /// When it first shows up, from the start of the run.
    pub start: Duration,
    /// Crasher: how long after its checkout it crashes.
    pub crash_after: Duration,
    /// Crasher: an admin revokes this stuck seat instead of waiting for the
    /// reaper (every second crasher; the first is always left to the reaper).
    pub revocable: bool,
    /// Flaky: one outage longer than the lease window, so it lapses.
    pub long_outage: bool,
    /// Idle and returner: how long after its first seat the user stops
    /// using the application.
    pub idle_after: Duration,
    /// Returner: how long the user stays away before using it again.
    pub away_for: Duration,
    /// The client's own generator (sessions, outages), derived from the seed.
    pub seed: u64,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub clients: Vec<ClientPlan>,
    /// Offsets from the start at which the admin revokes a seat (used only
    /// with an admin token).
    pub revokes: Vec<Duration>,
}

impl Plan {
    pub fn count(&self, b: Behaviour) -> usize {
        self.clients.iter().filter(|c| c.behaviour == b).count()
    }
}

/// The plan for `n` clients over `duration` from `seed`.
///
/// Timing is in fractions of the run, chosen so that a 60 s run on a pool
/// with a 30 s TTL shows everything: crashers take their seats first and
/// crash within the first 15 % (reaped after TTL + reap grace, inside the
/// run), late arrivals join the line from 25 to 35 %, and the admin revokes at 40 %
/// and 70 % (freeing a seat for whoever is in line).
pub fn plan(n: usize, duration: Duration, seed: u64) -> Plan {
    let mut rng = Rng::new(seed);
    let mut behaviours = mix(n, &mut rng);
    rng.shuffle(&mut behaviours);
    let mut crashers = 0;
    let mut flakies = 0;
    let mut used = std::collections::HashSet::new();
    let clients = behaviours
        .into_iter()
        .enumerate()
        .map(|(index, behaviour)| {
            let ci =
                matches!(behaviour, Behaviour::Releaser | Behaviour::Crasher) && rng.chance(0.3);
            let (mut holder, fingerprint) = identity(index, ci, &mut rng);
            if !used.insert(holder.clone()) {
                holder = format!("{holder} ({})", index + 1);
                used.insert(holder.clone());
            }
            let (lo, hi) = match behaviour {
                Behaviour::Crasher => (0.0, 0.01),
                Behaviour::Steady => (0.01, 0.04),
                Behaviour::Flaky => (0.01, 0.06),
                Behaviour::Releaser => (0.02, 0.20),
                Behaviour::Late => (0.25, 0.35),
                // Not drawn by `mix`: `with_a_borrower` turns a releaser,
                // `with_idle_clients` a steady one and a releaser.
                Behaviour::Borrower | Behaviour::Idle | Behaviour::Returner => (0.0, 0.02),
            };
            let start = rng.part_of(duration, lo, hi);
            let crash_after = rng.part_of(duration, 0.05, 0.15);
            let mut revocable = false;
            let mut long_outage = false;
            match behaviour {
                Behaviour::Crasher => {
                    revocable = crashers % 2 == 1;
                    crashers += 1;
                }
                Behaviour::Flaky => {
                    long_outage = flakies == 0 || rng.chance(0.3);
                    flakies += 1;
                }
                _ => {}
            }
            ClientPlan {
                index,
                behaviour,
                holder,
                fingerprint,
                start,
                crash_after,
                revocable,
                long_outage,
                idle_after: Duration::ZERO,
                away_for: Duration::ZERO,
                seed: rng.next_u64(),
            }
        })
        .collect();
    let clients = with_a_borrower(clients, duration);
    Plan {
        clients,
        revokes: vec![duration.mul_f64(0.40), duration.mul_f64(0.70)],
    }
}

/// From six clients on, one releaser (a person's laptop, if there is one)
/// becomes the borrower, and borrows in the first 2 % of the run, before
/// the pool fills (a borrow is what it is there to show). Chosen after the
/// plan is drawn, from its own seed, so every other client's plan for a
/// seed stays what it was.
fn with_a_borrower(mut clients: Vec<ClientPlan>, duration: Duration) -> Vec<ClientPlan> {
    if clients.len() < 6 {
        return clients;
    }
    let releasers = || {
        clients
            .iter()
            .filter(|c| c.behaviour == Behaviour::Releaser)
    };
    let pick = releasers()
        .find(|c| c.fingerprint.starts_with("wks-"))
        .or_else(|| releasers().next())
        .map(|c| c.index);
    if let Some(i) = pick {
        let c = &mut clients[i];
        c.behaviour = Behaviour::Borrower;
        c.start = Rng::new(c.seed).part_of(duration, 0.0, 0.02);
    }
    clients
}

/// On a license with an `idle_timeout`, one steady client (a person, if
/// there is one) becomes `Idle` and one releaser (not the borrower) the
/// `Returner`; without one, the plan is left as it is. Both show up in the
/// first 5 % of the run and work 5–10 % of it before walking away. The
/// returner stays away twice the timeout (reclaimed, then back) when that
/// ends by 80 % of the run, else half of it (back before the timeout).
/// Drawn from each client's own seed, so the rest of the plan stays what it
/// was.
pub fn with_idle_clients(
    mut plan: Plan,
    duration: Duration,
    idle_timeout: Option<Duration>,
) -> Plan {
    let Some(timeout) = idle_timeout else {
        return plan;
    };
    for (from, to) in [
        (Behaviour::Steady, Behaviour::Idle),
        (Behaviour::Releaser, Behaviour::Returner),
    ] {
        let of_kind = || plan.clients.iter().filter(|c| c.behaviour == from);
        let pick = of_kind()
            .find(|c| c.fingerprint.starts_with("wks-"))
            .or_else(|| of_kind().next())
            .map(|c| c.index);
        let Some(i) = pick else { continue };
        let c = &mut plan.clients[i];
        let mut rng = Rng::new(c.seed ^ 0x1d1e);
        c.behaviour = to;
        c.start = rng.part_of(duration, 0.0, 0.05);
        c.idle_after = rng.part_of(duration, 0.05, 0.10);
        let reclaimed_and_back = timeout.saturating_mul(2);
        c.away_for = if c.start + c.idle_after + reclaimed_and_back <= duration.mul_f64(0.8) {
            reclaimed_and_back
        } else {
            timeout / 2
        };
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_uniform_enough() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..5).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        let mut r = Rng::new(1);
        let mut buckets = [0u32; 4];
        for _ in 0..4000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            buckets[(u * 4.0) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (850..1150).contains(&b)),
            "{buckets:?}"
        );
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range_f64(2.0, 2.0), 2.0);
    }

    #[test]
    fn every_behaviour_from_five_clients_on() {
        for n in 5..=40 {
            let mix = mix(n, &mut Rng::new(n as u64));
            assert_eq!(mix.len(), n);
            for b in Behaviour::ALL {
                // The borrower is a releaser turned by `plan`, the idle
                // ones are turned by `with_idle_clients`.
                if !matches!(
                    b,
                    Behaviour::Borrower | Behaviour::Idle | Behaviour::Returner
                ) {
                    assert!(mix.contains(&b), "{n} clients: no {b}");
                }
            }
            // Releasers are the bulk; steady holders never crowd the pool.
            let releasers = mix.iter().filter(|b| **b == Behaviour::Releaser).count();
            let steady = mix.iter().filter(|b| **b == Behaviour::Steady).count();
            assert!(releasers >= steady, "{n}: {mix:?}");
        }
        assert_eq!(mix(0, &mut Rng::new(1)), vec![]);
        for n in 1..5 {
            let m = mix(n, &mut Rng::new(3));
            assert_eq!(m.len(), n);
            assert_eq!(m[0], Behaviour::Crasher);
        }
    }

    #[test]
    fn eight_clients_is_the_documented_mix() {
        let p = plan(8, Duration::from_secs(4), 1);
        let counts: Vec<usize> = Behaviour::ALL.iter().map(|b| p.count(*b)).collect();
        // steady, releaser, crasher, flaky, late, borrower, idle, returner
        assert_eq!(counts, vec![1, 3, 1, 1, 1, 1, 0, 0]);
    }

    #[test]
    fn one_borrower_from_six_clients_on_a_laptop() {
        let d = Duration::from_secs(60);
        for seed in 0..20 {
            assert_eq!(plan(5, d, seed).count(Behaviour::Borrower), 0);
            for n in [6, 8, 15, 40] {
                let p = plan(n, d, seed);
                assert_eq!(p.count(Behaviour::Borrower), 1, "{n} clients, seed {seed}");
                let b = p
                    .clients
                    .iter()
                    .find(|c| c.behaviour == Behaviour::Borrower);
                let laptops = p.clients.iter().any(|c| {
                    c.behaviour == Behaviour::Releaser && c.fingerprint.starts_with("wks-")
                });
                assert!(b.unwrap().fingerprint.starts_with("wks-") || !laptops);
                assert!(
                    b.unwrap().start <= d.mul_f64(0.02),
                    "borrows before the pool fills"
                );
            }
        }
    }

    #[test]
    fn the_end_to_end_plan_crowds_a_four_seat_pool() {
        let d = Duration::from_secs(4);
        let p = plan(8, d, 1);
        let mut asks: Vec<Duration> = p
            .clients
            .iter()
            .filter(|c| c.behaviour != Behaviour::Late)
            .map(|c| c.start)
            .collect();
        asks.sort();
        let first_release = p
            .clients
            .iter()
            .filter(|c| c.behaviour == Behaviour::Releaser)
            .map(|c| c.start + d.mul_f64(0.10))
            .min()
            .expect("releasers");
        assert!(
            asks[4] + Duration::from_millis(300) < first_release,
            "fifth ask at {:?}, first release at {first_release:?}",
            asks[4]
        );
    }

    #[test]
    fn same_seed_same_plan_other_seed_other_plan() {
        let d = Duration::from_secs(60);
        assert_eq!(plan(15, d, 42), plan(15, d, 42));
        assert_ne!(plan(15, d, 42), plan(15, d, 43));
    }

    #[test]
    fn schedule_fits_the_run() {
        let d = Duration::from_secs(60);
        for seed in 0..50 {
            let p = plan(15, d, seed);
            // Crashers alternate: left to the reaper, revoked by an admin, ...
            let big = plan(40, d, seed);
            let revocable: Vec<bool> = big
                .clients
                .iter()
                .filter(|c| c.behaviour == Behaviour::Crasher)
                .map(|c| c.revocable)
                .collect();
            assert_eq!(revocable, vec![false, true, false, true, false]);
            for c in &p.clients {
                assert!(c.start < d.mul_f64(0.5), "{c:?}");
                match c.behaviour {
                    Behaviour::Crasher => {
                        assert!(c.start + c.crash_after <= d.mul_f64(0.16), "{c:?}");
                    }
                    Behaviour::Late => assert!(c.start >= d.mul_f64(0.25), "{c:?}"),
                    _ => {}
                }
            }
            assert!(p.clients.iter().any(|c| c.long_outage));
        }
    }

    #[test]
    fn names_look_real_and_are_unique() {
        for seed in 0..20 {
            let p = plan(40, Duration::from_secs(60), seed);
            let mut holders = std::collections::HashSet::new();
            for c in &p.clients {
                assert!(holders.insert(c.holder.clone()), "duplicate {}", c.holder);
                assert!(
                    c.fingerprint.starts_with("wks-") || c.fingerprint.starts_with("ci-host-"),
                    "{}",
                    c.fingerprint
                );
                if c.fingerprint.starts_with("ci-host-") {
                    assert!(c.holder.starts_with("ci-runner-"), "{}", c.holder);
                } else {
                    assert!(c.holder.contains(' '), "a person's name: {}", c.holder);
                    let first = c.holder.split(' ').next().unwrap().to_lowercase();
                    assert!(c.fingerprint.starts_with(&format!("wks-{first}-")));
                }
                // Valid for the server: 1-128 printable characters.
                assert!((1..=128).contains(&c.holder.chars().count()));
                assert!(c.fingerprint.len() <= 128);
                assert!(!c.holder.chars().any(leasehold_common::text::is_unsafe_char));
            }
        }
        let mut r = Rng::new(5);
        assert_eq!(identity(6, true, &mut r).0, "ci-runner-07");
    }

    #[test]
    fn without_an_idle_timeout_no_client_goes_idle() {
        let d = Duration::from_secs(60);
        for seed in 0..20 {
            let p = plan(15, d, seed);
            assert_eq!(with_idle_clients(p.clone(), d, None), p);
        }
    }

    #[test]
    fn an_idle_timeout_turns_a_steady_client_idle_and_a_releaser_into_a_returner() {
        let d = Duration::from_secs(60);
        let t = Duration::from_secs(10);
        for seed in 0..20 {
            for n in [8, 15, 40] {
                let before = plan(n, d, seed);
                let after = with_idle_clients(before.clone(), d, Some(t));
                assert_eq!(after.count(Behaviour::Idle), 1, "{n}, seed {seed}");
                assert_eq!(after.count(Behaviour::Returner), 1, "{n}, seed {seed}");
                assert_eq!(after.count(Behaviour::Borrower), 1, "the borrower stays");
                for (b, a) in before.clients.iter().zip(&after.clients) {
                    match a.behaviour {
                        Behaviour::Idle => assert_eq!(b.behaviour, Behaviour::Steady),
                        Behaviour::Returner => assert_eq!(b.behaviour, Behaviour::Releaser),
                        _ => assert_eq!(a, b, "everyone else as planned"),
                    }
                    if matches!(a.behaviour, Behaviour::Idle | Behaviour::Returner) {
                        assert!(a.start <= d.mul_f64(0.05), "{a:?}");
                        assert!(a.idle_after >= d.mul_f64(0.05), "{a:?}");
                        assert!(a.idle_after <= d.mul_f64(0.10), "{a:?}");
                    }
                    if a.behaviour == Behaviour::Returner {
                        assert_eq!(a.away_for, t * 2, "reclaimed, then back: {a:?}");
                        assert!(a.start + a.idle_after + a.away_for <= d.mul_f64(0.8));
                    }
                }
            }
        }
        // A timeout too long for the run: back before it.
        let p = with_idle_clients(plan(8, d, 1), d, Some(Duration::from_secs(1800)));
        let r = p
            .clients
            .iter()
            .find(|c| c.behaviour == Behaviour::Returner);
        assert_eq!(r.unwrap().away_for, Duration::from_secs(900));
    }

    #[test]
    fn the_end_to_end_idle_plan_is_reclaimed_and_back_within_the_run() {
        // tests/tests/simulate.rs: 8 clients, 10 s, idle_timeout 3 s.
        let d = Duration::from_secs(10);
        let t = Duration::from_secs(3);
        let p = with_idle_clients(plan(8, d, 1), d, Some(t));
        let idle = p.clients.iter().find(|c| c.behaviour == Behaviour::Idle);
        let idle = idle.expect("an idle client");
        // Reclaimed by about start + idle_after + timeout + a heartbeat.
        assert!(idle.start + idle.idle_after + t + Duration::from_secs(1) < d.mul_f64(0.7));
        let r = p
            .clients
            .iter()
            .find(|c| c.behaviour == Behaviour::Returner);
        let r = r.expect("a returner");
        assert_eq!(r.away_for, t * 2);
        assert!(r.start + r.idle_after + r.away_for + Duration::from_secs(1) < d);
    }
}
