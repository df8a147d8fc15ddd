//! CSV as RFC 4180 writes it, made safe to open in a spreadsheet.
//!
//! Holder names and fingerprints are whatever a client sent (within the
//! checkout's text rules), so nothing here trusts a cell: one that a
//! spreadsheet would run as a formula (it starts with `=`, `+`, `-`, `@`,
//! a tab or a carriage return) gets a leading `'`, and one holding `,`,
//! `"`, CR or LF is quoted with its quotes doubled.

use leasehold_common::api::{DenialView, SessionView};

/// The header row of `GET /v1/admin/sessions` as CSV.
pub const SESSIONS_HEADER: &str = "seat_id,license_id,holder,fingerprint,started_at,ended_at,end,duration_s,group,borrowed,idle_s\r\n";

/// The header row of `GET /v1/admin/denials` as CSV.
pub const DENIALS_HEADER: &str = "at,license_id,holder,fingerprint,reason,true\r\n";

/// Append one cell, escaped.
fn cell(out: &mut String, text: &str) {
    let formula = text.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quoted = text.contains([',', '"', '\r', '\n']);
    if quoted {
        out.push('"');
    }
    if formula {
        out.push('\'');
    }
    if quoted {
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// Append one record (CRLF-terminated).
pub fn record(out: &mut String, cells: &[&str]) {
    for (i, text) in cells.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        cell(out, text);
    }
    out.push_str("\r\n");
}

/// Append a session as a record under [`SESSIONS_HEADER`].
pub fn session(out: &mut String, s: &SessionView) {
    let started = s.started_at.to_rfc3339();
    let ended = s.ended_at.map(|t| t.to_rfc3339()).unwrap_or_default();
    let duration = s.duration_s.to_string();
    let idle = s.idle_s.to_string();
    record(
        out,
        &[
            &s.seat_id,
            &s.license_id,
            &s.holder,
            s.fingerprint.as_deref().unwrap_or(""),
            &started,
            &ended,
            s.end.map_or("", |e| e.as_str()),
            &duration,
            s.group.as_deref().unwrap_or(""),
            if s.borrowed { "true" } else { "false" },
            &idle,
        ],
    );
}

/// Append a denial as a record under [`DENIALS_HEADER`].
pub fn denial(out: &mut String, d: &DenialView) {
    let at = d.at.to_rfc3339();
    record(
        out,
        &[
            &at,
            &d.license_id,
            &d.holder,
            d.fingerprint.as_deref().unwrap_or(""),
            d.reason.as_str(),
            if d.is_true { "true" } else { "false" },
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cells: &[&str]) -> String {
        let mut out = String::new();
        record(&mut out, cells);
        out
    }

    #[test]
    fn quotes_and_formula_prefixes() {
        assert_eq!(line(&["plain", "", "1.5"]), "plain,,1.5\r\n");
        assert_eq!(
            line(&["a,b", "say \"hi\""]),
            "\"a,b\",\"say \"\"hi\"\"\"\r\n"
        );
        assert_eq!(
            line(&["=HYPERLINK(\"x\")"]),
            "\"'=HYPERLINK(\"\"x\"\")\"\r\n"
        );
        assert_eq!(line(&["+1", "-2", "@a", "\tx"]), "'+1,'-2,'@a,'\tx\r\n");
        assert_eq!(line(&["\rx"]), "\"'\rx\"\r\n");
        assert_eq!(line(&["a=b", "1-2"]), "a=b,1-2\r\n");
    }

    fn view(group: Option<&str>) -> SessionView {
        SessionView {
            seat_id: "s1".into(),
            license_id: "demo-cad".into(),
            holder: "alice".into(),
            fingerprint: None,
            started_at: leasehold_common::time::Timestamp::from_millis(0),
            ended_at: None,
            end: None,
            duration_s: 1.5,
            group: group.map(str::to_string),
            borrowed: false,
            idle_s: 0.0,
        }
    }

    #[test]
    fn group_borrowed_and_idle_are_the_last_columns_and_escaped_like_the_others() {
        assert!(SESSIONS_HEADER.ends_with(",duration_s,group,borrowed,idle_s\r\n"));
        let mut out = String::new();
        session(&mut out, &view(Some("design")));
        assert_eq!(
            out,
            "s1,demo-cad,alice,,1970-01-01T00:00:00.000Z,,,1.5,design,false,0\r\n"
        );
        let mut out = String::new();
        session(
            &mut out,
            &SessionView {
                borrowed: true,
                idle_s: 61.5,
                ..view(None)
            },
        );
        assert!(out.ends_with(",1.5,,true,61.5\r\n"), "{out:?}");
        let mut out = String::new();
        session(&mut out, &view(Some("=cmd,x")));
        assert!(out.ends_with(",1.5,\"'=cmd,x\",false,0\r\n"), "{out:?}");
    }

    #[test]
    fn a_denial_is_a_record_of_six_escaped_cells() {
        use leasehold_common::api::DenialReason;
        let d = DenialView {
            at: leasehold_common::time::Timestamp::from_millis(1_234),
            license_id: "demo-cad".into(),
            holder: "=cmd|x".into(),
            fingerprint: Some("a,b".into()),
            reason: DenialReason::NotAllowed,
            is_true: false,
        };
        let mut out = String::new();
        denial(&mut out, &d);
        assert_eq!(
            out,
            "1970-01-01T00:00:01.234Z,demo-cad,'=cmd|x,\"a,b\",not_allowed,false\r\n"
        );
        let mut out = String::new();
        denial(
            &mut out,
            &DenialView {
                fingerprint: None,
                reason: DenialReason::Full,
                is_true: true,
                holder: "ann".into(),
                ..d
            },
        );
        assert_eq!(out, "1970-01-01T00:00:01.234Z,demo-cad,ann,,full,true\r\n");
        assert_eq!(DENIALS_HEADER.trim_end().split(',').count(), 6);
    }
}
