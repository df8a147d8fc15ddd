//! The licenses the bench checks out from, and the licenses file a server
//! needs for them.

pub const BIG: &str = "bench-big";
pub const BIG_KEY: &str = "bench-big-key";
pub const SMALL: &str = "bench-small";
pub const SMALL_KEY: &str = "bench-small-key";
pub const SMALL_SEATS: usize = 10;
/// For `scale`: a 100,000-seat pool filled to 99%.
pub const FULLISH: &str = "bench-fullish";
pub const FULLISH_KEY: &str = "bench-fullish-key";
pub const FULLISH_SEATS: usize = 100_000;
/// A pool as big as `BIG` with every checkout step a policy can add: eight
/// groups with reserves and maxes (the bench's holders fall into them by
/// connection), and a per-holder cap.
pub const POLICY: &str = "bench-policy";
pub const POLICY_KEY: &str = "bench-policy-key";
pub const POLICY_GROUPS: usize = 8;

/// The groups of `POLICY`: holder `g<k>-…` is in group `g<k>`.
fn policy_groups() -> String {
    (0..POLICY_GROUPS)
        .map(|g| {
            format!(
                "\n[[license.group]]\nname = \"g{g}\"\nholders = [\"g{g}-*\"]\nreserve = 1000\nmax = 5000000\n"
            )
        })
        .collect()
}

/// The bench pools; `with_policy` adds [`POLICY`].
pub fn licenses_toml(with_policy: bool) -> String {
    let policy = if with_policy {
        policy_pool()
    } else {
        String::new()
    };
    format!(
        r#"# Pools of leasehold-bench. Long TTLs so nothing lapses during a run.
[[license]]
id = "{BIG}"
key = "{BIG_KEY}"
seats = 10000000
ttl = "300s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "{SMALL}"
key = "{SMALL_KEY}"
seats = {SMALL_SEATS}
ttl = "300s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "{FULLISH}"
key = "{FULLISH_KEY}"
seats = {FULLISH_SEATS}
ttl = "300s"
skew = "5s"
reap_grace = "15s"
{policy}"#
    )
}

fn policy_pool() -> String {
    format!(
        r#"
[[license]]
id = "{POLICY}"
key = "{POLICY_KEY}"
seats = 10000000
ttl = "300s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 1
{}"#,
        policy_groups()
    )
}
