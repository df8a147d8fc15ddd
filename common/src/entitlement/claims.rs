//! An entitlement's claims, read from its JSON and checked claim by claim:
//! every error names the claim, for the `rejected` event an admin reads.
//!
//! Other claims, and other fields of a `licenses` item, are ignored here
//! and reach the vendor's application unchanged inside the JWS.

use serde_json::{Map, Value};

use super::versions::VersionRange;

/// Timestamps are whole seconds up to the end of year 9999.
pub const MAX_TIMESTAMP_S: i64 = 253_402_300_799;
/// At most 90 days of grace after `exp`.
pub const MAX_GRACE_S: i64 = 7_776_000;
pub const MAX_LICENSES: usize = 100;
pub const MAX_SEATS: u32 = 1_000_000;

/// What one entitlement grants one license.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LicenseGrant {
    pub id: String,
    pub seats: u32,
    pub versions: Option<VersionRange>,
    pub overage: u32,
    pub borrow: Option<BorrowGrant>,
}

/// `{"max": seconds, "seats": n}`: borrowing allowed, up to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BorrowGrant {
    pub max_s: i64,
    pub seats: u32,
}

/// The claims the server reads. Times in whole seconds, as signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The vendor's name.
    pub iss: String,
    /// The entitlement's id: a renewal keeps it.
    pub jti: String,
    pub iat: i64,
    /// The customer, for display.
    pub sub: Option<String>,
    /// The `kid`s of the servers it is bound to; empty: any server.
    pub aud: Vec<String>,
    pub nbf: Option<i64>,
    pub exp: Option<i64>,
    pub grace: i64,
    /// Empty: a tombstone that withdraws the entitlement of this `jti`.
    pub licenses: Vec<LicenseGrant>,
}

impl Claims {
    /// Reads and checks the claims of a decoded payload.
    pub fn from_json(payload: &Value) -> Result<Claims, String> {
        let map = payload
            .as_object()
            .ok_or("the claims are not a JSON object")?;
        let iss = required_string(map, "iss")?;
        if iss.is_empty() {
            return Err("claim iss: must not be empty".into());
        }
        let jti = required_string(map, "jti")?;
        check_jti(&jti)?;
        let iat = timestamp(map, "iat")?.ok_or("claim iat: required")?;
        let nbf = timestamp(map, "nbf")?;
        let exp = timestamp(map, "exp")?;
        if let (Some(nbf), Some(exp)) = (nbf, exp)
            && exp <= nbf
        {
            return Err("claim exp: must be after nbf".into());
        }
        let grace = grace(map, exp)?;
        Ok(Claims {
            iss,
            jti,
            iat,
            sub: optional_string(map, "sub")?,
            aud: audience(map)?,
            nbf,
            exp,
            grace,
            licenses: licenses(map)?,
        })
    }

    /// The instant it stops granting, in ms: `exp + grace`; `None` when
    /// perpetual.
    pub fn ends_at_ms(&self) -> Option<i64> {
        self.exp.map(|exp| (exp + self.grace) * 1000)
    }

    pub fn is_tombstone(&self) -> bool {
        self.licenses.is_empty()
    }

    pub fn grant_for(&self, license: &str) -> Option<&LicenseGrant> {
        self.licenses.iter().find(|g| g.id == license)
    }
}

fn required_string(map: &Map<String, Value>, claim: &str) -> Result<String, String> {
    optional_string(map, claim)?.ok_or_else(|| format!("claim {claim}: required"))
}

fn optional_string(map: &Map<String, Value>, claim: &str) -> Result<Option<String>, String> {
    match map.get(claim) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("claim {claim}: must be a string")),
    }
}

fn check_jti(jti: &str) -> Result<(), String> {
    let plain = jti
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if jti.is_empty() || jti.len() > 64 || !plain {
        return Err("claim jti: must be 1-64 of A-Za-z0-9._-".into());
    }
    Ok(())
}

fn integer(map: &Map<String, Value>, claim: &str) -> Result<Option<i64>, String> {
    match map.get(claim) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("claim {claim}: must be a whole number")),
    }
}

fn timestamp(map: &Map<String, Value>, claim: &str) -> Result<Option<i64>, String> {
    let t = integer(map, claim)?;
    if t.is_some_and(|t| !(0..=MAX_TIMESTAMP_S).contains(&t)) {
        return Err(format!(
            "claim {claim}: must be whole seconds from 0 to {MAX_TIMESTAMP_S} (year 9999)"
        ));
    }
    Ok(t)
}

fn grace(map: &Map<String, Value>, exp: Option<i64>) -> Result<i64, String> {
    let Some(grace) = integer(map, "grace")? else {
        return Ok(0);
    };
    if exp.is_none() {
        return Err("claim grace: only with exp".into());
    }
    if !(0..=MAX_GRACE_S).contains(&grace) {
        return Err(format!("claim grace: must be 0 to {MAX_GRACE_S} seconds"));
    }
    Ok(grace)
}

fn audience(map: &Map<String, Value>) -> Result<Vec<String>, String> {
    let bad = || "claim aud: must be a string or an array of strings".to_string();
    match map.get("aud") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(kid)) => Ok(vec![kid.clone()]),
        Some(Value::Array(kids)) => kids
            .iter()
            .map(|k| k.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

fn licenses(map: &Map<String, Value>) -> Result<Vec<LicenseGrant>, String> {
    let items = map
        .get("licenses")
        .ok_or("claim licenses: required")?
        .as_array()
        .ok_or("claim licenses: must be an array")?;
    if items.len() > MAX_LICENSES {
        return Err(format!("claim licenses: at most {MAX_LICENSES} items"));
    }
    let mut grants: Vec<LicenseGrant> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let grant = license_item(item).map_err(|e| format!("claim licenses[{i}]: {e}"))?;
        if grants.iter().any(|g| g.id == grant.id) {
            return Err(format!("claim licenses: license {:?} twice", grant.id));
        }
        grants.push(grant);
    }
    Ok(grants)
}

fn license_item(item: &Value) -> Result<LicenseGrant, String> {
    let map = item.as_object().ok_or("must be an object")?;
    let id = required_field_string(map, "id")?;
    let plain = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if id.is_empty() || id.len() > 64 || !plain {
        return Err("id: must be 1-64 of A-Za-z0-9._-".into());
    }
    let seats = count(map, "seats", 1, MAX_SEATS)?.ok_or("seats: required")?;
    let versions = match map.get("versions") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            Some(VersionRange::parse(text).map_err(|e| format!("versions: {e}"))?)
        }
        Some(_) => return Err("versions: must be a string".into()),
    };
    let overage = count(map, "overage", 0, MAX_SEATS)?.unwrap_or(0);
    let borrow = match map.get("borrow") {
        None | Some(Value::Null) => None,
        Some(b) => Some(borrow(b).map_err(|e| format!("borrow: {e}"))?),
    };
    Ok(LicenseGrant {
        id,
        seats,
        versions,
        overage,
        borrow,
    })
}

fn required_field_string(map: &Map<String, Value>, field: &str) -> Result<String, String> {
    match map.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{field}: must be a string")),
        None => Err(format!("{field}: required")),
    }
}

fn count(map: &Map<String, Value>, field: &str, min: u32, max: u32) -> Result<Option<u32>, String> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (u64::from(min)..=u64::from(max)).contains(n))
            .map(|n| Some(n as u32))
            .ok_or_else(|| format!("{field}: must be a whole number from {min} to {max}")),
    }
}

fn borrow(value: &Value) -> Result<BorrowGrant, String> {
    let map = value.as_object().ok_or("must be an object")?;
    let max_s = integer_field(map, "max")?
        .filter(|s| (1..=MAX_TIMESTAMP_S).contains(s))
        .ok_or("max: must be a whole number of seconds, at least 1")?;
    let seats = count(map, "seats", 1, MAX_SEATS)?.ok_or("seats: required")?;
    Ok(BorrowGrant { max_s, seats })
}

fn integer_field(map: &Map<String, Value>, field: &str) -> Result<Option<i64>, String> {
    match map.get(field) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("{field}: must be a whole number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({
            "iss": "keyright", "jti": "acme-2026", "iat": 1_780_000_000, "sub": "Acme",
            "exp": 1_790_000_000, "grace": 86_400, "aud": ["kid-a", "kid-b"],
            "edition": "pro",
            "licenses": [
                {"id": "cad", "seats": 10, "versions": ">=2025.1, <2027", "features": ["x"]},
                {"id": "ide", "seats": 3, "overage": 2, "borrow": {"max": 259_200, "seats": 2}}
            ]
        })
    }

    #[test]
    fn a_good_entitlement_reads_whole() {
        let c = Claims::from_json(&good()).unwrap();
        assert_eq!((c.iss.as_str(), c.jti.as_str()), ("keyright", "acme-2026"));
        assert_eq!(c.sub.as_deref(), Some("Acme"));
        assert_eq!(c.aud, ["kid-a", "kid-b"]);
        assert_eq!(c.ends_at_ms(), Some((1_790_000_000 + 86_400) * 1000));
        let cad = c.grant_for("cad").unwrap();
        assert_eq!(cad.seats, 10);
        assert_eq!(
            cad.versions.as_ref().unwrap().to_string(),
            ">=2025.1, <2027"
        );
        let ide = c.grant_for("ide").unwrap();
        assert_eq!(
            (ide.overage, ide.borrow),
            (
                2,
                Some(BorrowGrant {
                    max_s: 259_200,
                    seats: 2
                })
            )
        );
        assert!(!c.is_tombstone());
    }

    #[test]
    fn a_tombstone_is_an_empty_list_and_aud_may_be_one_kid() {
        let mut v = good();
        v["licenses"] = json!([]);
        v["aud"] = json!("kid-a");
        let c = Claims::from_json(&v).unwrap();
        assert!(c.is_tombstone());
        assert_eq!(c.aud, ["kid-a"]);
    }

    #[test]
    fn each_mistake_names_its_claim() {
        type Spoil = fn(&mut Value);
        let cases: Vec<(Spoil, &str)> = vec![
            (
                |v| drop(v.as_object_mut().unwrap().remove("iss")),
                "claim iss: required",
            ),
            (|v| v["jti"] = json!("has space"), "claim jti"),
            (|v| v["jti"] = json!("x".repeat(65)), "claim jti"),
            (
                |v| v["iat"] = json!("soon"),
                "claim iat: must be a whole number",
            ),
            (
                |v| v["iat"] = json!(253_402_300_800i64),
                "claim iat: must be whole seconds",
            ),
            (
                |v| v["nbf"] = json!(1_790_000_000),
                "claim exp: must be after nbf",
            ),
            (
                |v| drop(v.as_object_mut().unwrap().remove("exp")),
                "claim grace: only with exp",
            ),
            (
                |v| v["grace"] = json!(7_776_001),
                "claim grace: must be 0 to",
            ),
            (|v| v["aud"] = json!([1]), "claim aud"),
            (
                |v| v["licenses"] = json!({}),
                "claim licenses: must be an array",
            ),
            (
                |v| v["licenses"][1]["id"] = json!("cad"),
                "license \"cad\" twice",
            ),
            (
                |v| v["licenses"][0]["seats"] = json!(0),
                "claim licenses[0]: seats",
            ),
            (
                |v| v["licenses"][0]["seats"] = json!(1_000_001),
                "claim licenses[0]: seats",
            ),
            (
                |v| v["licenses"][0]["versions"] = json!("~2"),
                "claim licenses[0]: versions",
            ),
            (
                |v| v["licenses"][1]["borrow"] = json!({"max": 0, "seats": 1}),
                "borrow: max",
            ),
            (
                |v| v["licenses"][1]["id"] = json!("a/b"),
                "claim licenses[1]: id",
            ),
        ];
        for (spoil, says) in cases {
            let mut v = good();
            spoil(&mut v);
            let err = Claims::from_json(&v).unwrap_err();
            assert!(err.contains(says), "{err:?} should say {says:?}");
        }
        let many: Vec<Value> = (0..101)
            .map(|i| json!({"id": format!("l{i}"), "seats": 1}))
            .collect();
        let mut v = good();
        v["licenses"] = json!(many);
        assert!(Claims::from_json(&v).unwrap_err().contains("at most 100"));
    }
}
