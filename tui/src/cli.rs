//! Command-line flags of `leasehold`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

pub use crate::conn::ConnArgs;
use crate::duration::parse_block;

/// Leasehold admin console: watch seats live and revoke stuck ones.
///
/// Without a subcommand, opens the console. The subcommands are one-shot
/// commands for scripts and support staff; each prints a table, or JSON
/// with --json. Errors go to stderr as one line, with a non-zero exit.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version)]
pub struct Cli {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// Console: never revoke (the `r` key is disabled).
    #[arg(long)]
    pub read_only: bool,

    /// Console: write logs to this file (default:
    /// $XDG_STATE_HOME/leasehold/console.log). Filter with LEASEHOLD_LOG.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<TopCommand>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// License pools: seats, live, free, policy.
    Status {
        /// Print the server's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Seats not yet reaped, live or lapsed.
    Seats {
        /// Only this license.
        #[arg(long, value_name = "ID")]
        license: Option<String>,
        /// Print the server's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The event log: the newest events, or those after an id; --follow
    /// keeps streaming new ones.
    Events {
        /// Keep running and print events as they happen (reconnects and
        /// resumes by event id if the connection drops).
        #[arg(long)]
        follow: bool,
        /// Only events with an id greater than this.
        #[arg(long, value_name = "ID")]
        after: Option<i64>,
        /// How many events to print before following (the newest ones,
        /// or the first after --after).
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: u32,
        /// JSON: the server's response; with --follow one event per line.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a seat now: its holder gets 410 at the next heartbeat.
    Revoke {
        /// The full seat id (see `leasehold seats`).
        seat_id: String,
        /// Why, for the event log.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Refuse re-checkout by the same holder + fingerprint for this
        /// long, e.g. 10m, 1h.
        #[arg(long, value_name = "DURATION", value_parser = parse_block)]
        block: Option<Duration>,
        /// Free a borrowed seat too. Without it the server refuses (409
        /// borrowed): the holder's token stays valid offline until the
        /// borrow ends, so the pool may be over-used until then.
        #[arg(long)]
        force: bool,
        /// Print {"seat_id": ..., "revoked": true} on success.
        #[arg(long)]
        json: bool,
    },
    /// Usage over a range per license: seats, peak, time at full (and over
    /// the pool, if any), denials, utilization, seat-hours, holders, top
    /// holders, and a verdict: did we buy enough seats? With --attest, one
    /// license's figures signed by the server, for its vendor.
    #[command(after_help = crate::report::verdict::thresholds_help())]
    Report(crate::report::ReportArgs),
    /// Webhooks with their deliveries (pending, delivered, failed, the last
    /// error) and the alerts firing now; `deliveries` lists deliveries,
    /// `test NAME` queues a test delivery.
    Webhooks(crate::webhooks::WebhooksArgs),
    /// The vendor-signed entitlement files the server reads: per file its
    /// vendor, id, customer, state, the seats it grants and when it ends
    /// (and why it is rejected); first the server's kid, which a bound
    /// file must name.
    Entitlements {
        /// Print the server's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Every subcommand: the admin one-shot commands, and `simulate`, which
/// speaks the client API (its admin token is optional).
#[derive(Debug, Subcommand)]
pub enum TopCommand {
    #[command(flatten)]
    Admin(Command),
    /// Run simulated clients against the server (steady, releasing,
    /// crashing, flaky, queueing) so the console has something to show.
    Simulate(crate::simulate::SimulateArgs),
    /// Borrow a seat for offline use (no heartbeats until it ends): prints
    /// the lease and writes its token to --out. Uses the license key, not
    /// the admin token.
    Borrow(crate::borrow::BorrowArgs),
    /// Return a borrowed seat early (the client's DELETE): it is free at once.
    Return(crate::borrow::ReturnArgs),
    /// The vendor's tool (no server needed): make a vendor key, sign
    /// entitlement files, check a customer's usage statement.
    Vendor(crate::vendor::VendorArgs),
    /// Read an entitlement file and check its signature (no server needed).
    Entitlement(crate::vendor::EntitlementArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::DEFAULT_SERVER;
    use crate::report::range::FromArg;

    #[test]
    fn parses_subcommands_and_global_flags() {
        let cli = Cli::try_parse_from([
            "leasehold",
            "seats",
            "--license",
            "demo-cad",
            "--json",
            "--server",
            "http://x:1",
        ])
        .unwrap();
        assert_eq!(cli.conn.server, "http://x:1");
        assert!(matches!(
            cli.command,
            Some(TopCommand::Admin(Command::Seats { license: Some(ref l), json: true })) if l == "demo-cad"
        ));

        let cli = Cli::try_parse_from([
            "leasehold",
            "revoke",
            "abc",
            "--reason",
            "stuck",
            "--block",
            "10m",
        ])
        .unwrap();
        match cli.command {
            Some(TopCommand::Admin(Command::Revoke {
                seat_id,
                reason,
                block,
                force,
                json,
            })) => {
                assert_eq!(seat_id, "abc");
                assert_eq!(reason.as_deref(), Some("stuck"));
                assert_eq!(block, Some(Duration::from_secs(600)));
                assert!(!json && !force);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["leasehold", "revoke", "abc", "--force"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(TopCommand::Admin(Command::Revoke { force: true, .. }))
        ));
        assert!(Cli::try_parse_from(["leasehold", "revoke", "abc", "--block", "soon"]).is_err());

        let cli = Cli::try_parse_from([
            "leasehold",
            "simulate",
            "--clients",
            "8",
            "--duration",
            "4s",
            "--seed",
            "1",
            "--server",
            "http://x:1",
        ])
        .unwrap();
        match cli.command {
            Some(TopCommand::Simulate(a)) => {
                assert_eq!(a.clients, Some(8));
                assert_eq!(a.duration, Duration::from_secs(4));
                assert_eq!(a.seed, Some(1));
                assert!(a.license.is_none() && !a.quiet && !a.json);
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["leasehold", "simulate", "--clients", "0"]).is_err());

        let cli = Cli::try_parse_from([
            "leasehold",
            "report",
            "--license",
            "demo-cad",
            "--from",
            "24h",
            "--to",
            "2026-11-30T04:00:00Z",
            "--step",
            "1h",
            "--json",
        ])
        .unwrap();
        match cli.command {
            Some(TopCommand::Admin(Command::Report(a))) => {
                assert_eq!(a.license.as_deref(), Some("demo-cad"));
                assert_eq!(a.from, FromArg::Ago(Duration::from_secs(86_400)));
                assert_eq!(
                    a.to.map(|t| t.to_string()).as_deref(),
                    Some("2026-11-30T04:00:00.000Z")
                );
                assert_eq!(a.step, Some(Duration::from_secs(3600)));
                assert!(a.json && !a.csv);
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["leasehold", "report"]).unwrap();
        match cli.command {
            Some(TopCommand::Admin(Command::Report(a))) => {
                assert_eq!(a.from, FromArg::Ago(Duration::from_secs(7 * 86_400)));
                assert!(a.license.is_none() && a.to.is_none() && a.step.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["leasehold", "report", "--json", "--csv"]).is_err());
        #[rustfmt::skip]
        let cli = Cli::try_parse_from([
            "leasehold", "report", "--attest", "--license", "cad", "--from", "30d",
            "--out", "usage.jws",
        ])
        .unwrap();
        match cli.command {
            Some(TopCommand::Admin(Command::Report(a))) => {
                assert!(a.attest && !a.json && !a.csv && !a.what_if);
                assert_eq!(a.from, FromArg::Ago(Duration::from_secs(30 * 86_400)));
                assert_eq!(a.out.as_deref(), Some(std::path::Path::new("usage.jws")));
            }
            other => panic!("{other:?}"),
        }
        // --attest is one license to one file, never with another output.
        for bad in [
            &["--attest", "--out", "u.jws"][..],
            &["--attest", "--license", "cad"],
            &["--out", "u.jws", "--license", "cad"],
            &["--attest", "--license", "cad", "--out", "u.jws", "--json"],
            &["--attest", "--license", "cad", "--out", "u.jws", "--csv"],
            &[
                "--attest",
                "--license",
                "cad",
                "--out",
                "u.jws",
                "--what-if",
            ],
        ] {
            let args = [&["leasehold", "report"][..], bad].concat();
            assert!(Cli::try_parse_from(args).is_err(), "{bad:?}");
        }
        assert!(Cli::try_parse_from(["leasehold", "report", "--to", "1h"]).is_err());

        #[rustfmt::skip]
        let cli = Cli::try_parse_from([
            "leasehold", "report", "--what-if", "--idle-timeout", "30m", "--target", "0.5",
            "--seats", "2..40", "--tolerance", "0s", "--json",
        ])
        .unwrap();
        match cli.command {
            Some(TopCommand::Admin(Command::Report(a))) => {
                assert!(a.what_if && a.json);
                assert_eq!(a.idle_timeout, Some(Duration::from_secs(1800)));
                assert_eq!((a.target, a.seats), (Some(0.5), Some((2, 40))));
                assert_eq!(a.tolerance, Some(Duration::ZERO));
            }
            other => panic!("{other:?}"),
        }
        // Bad values, and the replay's flags without --what-if, are refused
        // by the parser: no request is ever made with them.
        for bad in [
            &["--what-if", "--target", "101"][..],
            &["--what-if", "--target", "-1"],
            &["--what-if", "--idle-timeout", "0s"],
            &["--what-if", "--idle-timeout", "later"],
            &["--what-if", "--seats", "9..3"],
            &["--what-if", "--csv"],
            &["--target", "1"],
            &["--idle-timeout", "30m"],
            &["--tolerance", "2h"],
        ] {
            let args = [&["leasehold", "report"][..], bad].concat();
            assert!(Cli::try_parse_from(args).is_err(), "{bad:?}");
        }

        #[rustfmt::skip]
        let cli = Cli::try_parse_from([
            "leasehold", "borrow", "--license", "cad", "--key", "k", "--holder", "alice",
            "--fingerprint", "fp", "--for", "3d", "--out", "seat.jwt",
        ])
        .unwrap();
        match cli.command {
            Some(TopCommand::Borrow(a)) => {
                assert_eq!(
                    (a.license.license.as_str(), a.license.key.as_str()),
                    ("cad", "k")
                );
                assert_eq!(a.duration, Duration::from_secs(3 * 86_400));
                assert_eq!(a.out.as_deref(), Some(std::path::Path::new("seat.jwt")));
                assert!(!a.json);
            }
            other => panic!("{other:?}"),
        }
        #[rustfmt::skip]
        let bad_for = ["leasehold", "borrow", "--license", "cad", "--key", "k", "--holder", "a",
            "--fingerprint", "fp", "--for", "soon"];
        assert!(Cli::try_parse_from(bad_for).is_err());
        let cli = Cli::try_parse_from([
            "leasehold",
            "return",
            "--license",
            "cad",
            "--key",
            "k",
            "abc",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Some(TopCommand::Return(ref a)) if a.seat_id == "abc" && a.license.license == "cad"
        ));

        let cli = Cli::try_parse_from(["leasehold", "entitlements", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(TopCommand::Admin(Command::Entitlements { json: true }))
        ));
        // `entitlement` (the file tool) is another command.
        let cli = Cli::try_parse_from(["leasehold", "entitlement", "inspect", "a.lic"]).unwrap();
        assert!(matches!(cli.command, Some(TopCommand::Entitlement(_))));
        #[rustfmt::skip]
        let cli = Cli::try_parse_from([
            "leasehold", "vendor", "verify-usage", "usage.jws", "--entitlement", "acme.lic",
            "--vendor-key", "@vendor.pub",
        ])
        .unwrap();
        // A base64url key may begin with `-` (1 key in 64): still the value.
        #[rustfmt::skip]
        let hyphen = Cli::try_parse_from([
            "leasehold", "vendor", "verify-usage", "usage.jws", "--entitlement", "acme.lic",
            "--vendor-key", "-PkeyStartingWithAHyphen",
        ])
        .unwrap();
        assert!(matches!(
            hyphen.command,
            Some(TopCommand::Vendor(crate::vendor::VendorArgs {
                command: crate::vendor::VendorCommand::VerifyUsage(ref a),
            })) if a.vendor_key == "-PkeyStartingWithAHyphen"
        ));
        #[rustfmt::skip]
        let hyphen = Cli::try_parse_from([
            "leasehold", "entitlement", "inspect", "a.lic", "--vendor-key", "-Pkey",
        ]);
        assert!(hyphen.is_ok(), "{hyphen:?}");
        match cli.command {
            Some(TopCommand::Vendor(crate::vendor::VendorArgs {
                command: crate::vendor::VendorCommand::VerifyUsage(a),
            })) => {
                assert_eq!(a.file, std::path::Path::new("usage.jws"));
                assert_eq!(a.entitlement, std::path::Path::new("acme.lic"));
                assert_eq!(a.vendor_key, "@vendor.pub");
            }
            other => panic!("{other:?}"),
        }
        // The vendor key is needed: without it nothing says whose file it is.
        assert!(
            Cli::try_parse_from([
                "leasehold",
                "vendor",
                "verify-usage",
                "u.jws",
                "--entitlement",
                "a.lic"
            ])
            .is_err()
        );

        let cli = Cli::try_parse_from(["leasehold", "--read-only"]).unwrap();
        assert!(cli.read_only && cli.command.is_none());
        // (LEASEHOLD_SERVER, if the environment has one, wins over the
        // default; tui/tests/cli.rs runs the binary with and without it.)
        if std::env::var_os(crate::conn::SERVER_ENV).is_none() {
            assert_eq!(cli.conn.server, DEFAULT_SERVER);
        }
    }
}
