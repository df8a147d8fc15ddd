//! Licenses-file fixtures shared by the suites.

/// One `[[license]]` table of a licenses file, as a string literal (so
/// fixtures stay `const`); the key is always `"<id>-key"`.
#[macro_export]
macro_rules! license_toml {
    ($id:literal, seats = $seats:literal, ttl = $ttl:literal, skew = $skew:literal, reap_grace = $grace:literal) => {
        concat!(
            "\n[[license]]\nid = \"",
            $id,
            "\"\nkey = \"",
            $id,
            "-key\"\nseats = ",
            $seats,
            "\nttl = \"",
            $ttl,
            "\"\nskew = \"",
            $skew,
            "\"\nreap_grace = \"",
            $grace,
            "\"\n"
        )
    };
}

/// Demo-like pools for tests: `small` (5 seats), `tiny` (1 seat), `short`
/// (1 s TTL, reaped quickly).
#[rustfmt::skip]
pub const TEST_LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("tiny", seats = 1, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("short", seats = 2, ttl = "1s", skew = "0s", reap_grace = "300ms"),
);

/// `lab`: 3 seats, of which up to 2 may be borrowed for up to 7 days.
pub const LENDING: &str = concat!(
    license_toml!(
        "lab",
        seats = 3,
        ttl = "60s",
        skew = "5s",
        reap_grace = "15s"
    ),
    "\n[license.borrow]\nmax = \"7d\"\nseats = 2\n",
);
