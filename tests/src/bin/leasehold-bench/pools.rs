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

pub fn licenses_toml() -> String {
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
"#
    )
}
