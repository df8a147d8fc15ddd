//! Judging the entitlements directory's files, each alone: which load and
//! which are rejected, and why (one line each, naming the claim, for the
//! `entitlement` event an admin reads).
//!
//! A file that was good and now fails (rewritten in place, half written)
//! keeps its last good content until it is removed or good again. Pure:
//! the caller reads the files, and gives the vendors, this server's `kid`s,
//! the wall clock and what the store remembers.

use std::collections::{BTreeMap, HashMap};

use leasehold_common::entitlement::{Entitlement, Newest, VendorKey, decode, jws_of_file};

/// An `iat` further ahead of the wall clock than this never loads: a
/// vendor's wrong clock must not push this server's decision clock.
pub const IAT_AHEAD_MAX_S: i64 = 24 * 3600;

/// What a file is judged against.
#[derive(Debug, Clone, Copy)]
pub struct Judge<'a> {
    /// `[[vendor]]` names and their public keys.
    pub vendors: &'a HashMap<String, Vec<VendorKey>>,
    /// This server's `kid`s (a bound file must name one).
    pub kids: &'a [String],
    /// The server's wall clock, whole seconds.
    pub wall_s: i64,
    /// The claims hash the store remembers for a vendor's id at its
    /// newest `iat`.
    pub remembered: &'a HashMap<(String, String), (Newest, String)>,
}

/// The outcome for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Loaded(Entitlement),
    Rejected(String),
    /// It failed, and its last good content stays in force.
    Kept {
        why: String,
        last_good: Entitlement,
    },
}

impl Verdict {
    pub fn in_force(&self) -> Option<&Entitlement> {
        match self {
            Verdict::Loaded(e) | Verdict::Kept { last_good: e, .. } => Some(e),
            Verdict::Rejected(_) => None,
        }
    }
}

/// Judges `files` (name → its text, or why it could not be read), given
/// the verdicts of the last scan for the last good content.
pub fn judge_all(
    files: &BTreeMap<String, Result<String, String>>,
    previous: &BTreeMap<String, Verdict>,
    judge: Judge<'_>,
) -> BTreeMap<String, Verdict> {
    let mut verdicts: BTreeMap<String, Verdict> = files
        .iter()
        .map(|(name, text)| {
            let verdict = match text {
                Ok(text) => judge_one(text, judge),
                Err(why) => Verdict::Rejected(why.clone()),
            };
            (name.clone(), verdict)
        })
        .collect();
    reject_same_iat_other_claims(&mut verdicts, judge.remembered);
    for (name, verdict) in verdicts.iter_mut() {
        if let (Verdict::Rejected(why), Some(good)) =
            (&*verdict, previous.get(name).and_then(Verdict::in_force))
        {
            *verdict = Verdict::Kept {
                why: why.clone(),
                last_good: good.clone(),
            };
        }
    }
    verdicts
}

/// One file's own checks, in the brief's order: form and claims, the
/// clock, the vendor, the signature, the binding.
pub fn judge_one(text: &str, judge: Judge<'_>) -> Verdict {
    match check(text, judge) {
        Ok(e) => Verdict::Loaded(e),
        Err(why) => Verdict::Rejected(why),
    }
}

fn check(text: &str, judge: Judge<'_>) -> Result<Entitlement, String> {
    let unverified = decode(&jws_of_file(text))?;
    let claims = unverified.claims();
    if claims.iat > judge.wall_s + IAT_AHEAD_MAX_S {
        return Err("iat in the future: check this server's clock".into());
    }
    let keys = judge.vendors.get(&claims.iss).ok_or_else(|| {
        format!(
            "claim iss: {:?} is no [[vendor]] of the licenses file",
            claims.iss
        )
    })?;
    let bound_elsewhere =
        !claims.aud.is_empty() && !claims.aud.iter().any(|k| judge.kids.contains(k));
    let entitlement = unverified.verify(keys)?;
    if bound_elsewhere {
        return Err(format!(
            "claim aud: bound to another server (this one's kid is {})",
            judge.kids.join(", ")
        ));
    }
    Ok(entitlement)
}

/// Two files (or a file and the store's memory) with the same vendor, id
/// and `iat` but different claims: neither can be the vendor's intent, so
/// both files are rejected.
fn reject_same_iat_other_claims(
    verdicts: &mut BTreeMap<String, Verdict>,
    remembered: &HashMap<(String, String), (Newest, String)>,
) {
    let mut hashes: HashMap<(String, String, i64), Vec<(String, String)>> = HashMap::new();
    for (name, verdict) in verdicts.iter() {
        if let Verdict::Loaded(e) = verdict {
            let c = &e.claims;
            hashes
                .entry((c.iss.clone(), c.jti.clone(), c.iat))
                .or_default()
                .push((name.clone(), e.claims_hash.clone()));
        }
    }
    for ((iss, jti, iat), files) in hashes {
        let stored = remembered
            .get(&(iss.clone(), jti.clone()))
            .filter(|(newest, _)| newest.iat == iat)
            .map(|(_, hash)| hash.clone());
        let mut distinct: Vec<&String> = files.iter().map(|(_, h)| h).chain(&stored).collect();
        distinct.sort();
        distinct.dedup();
        if distinct.len() < 2 {
            continue;
        }
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        for (name, _) in &files {
            verdicts.insert(
                name.clone(),
                Verdict::Rejected(format!(
                    "claim iat: {iss}/{jti} issued at {iat} with other claims too ({}{})",
                    names.join(", "),
                    if stored.is_some() {
                        ", and as remembered"
                    } else {
                        ""
                    }
                )),
            );
        }
    }
}
