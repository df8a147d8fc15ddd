//! `leaseholdd backup` and `leaseholdd restore` against the real binary: a
//! backup taken while the server serves load, restored into a fresh data
//! dir, serves the same history up to the backup instant and numbers new
//! events after the backup's; and each refusal changes nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use leasehold_common::time::Timestamp;
use leasehold_tests::{
    Server, ServerOptions, TEST_LICENSES, TestStore, require_tool, run_leaseholdd_expecting_exit,
};
use serde_json::{Value, json};

/// Run `leaseholdd ARGS` (a backup or restore) to its exit: success and
/// the stderr.
fn leaseholdd(args: &[&str]) -> (bool, String) {
    let (status, stderr) = run_leaseholdd_expecting_exit(args, Duration::from_secs(120));
    (status.success(), stderr)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn backup(data_dir: &Path, out: &Path, force: bool) -> (bool, String) {
    let mut args = vec![
        "backup",
        "--data-dir",
        path_str(data_dir),
        "--out",
        path_str(out),
    ];
    if force {
        args.push("--force");
    }
    leaseholdd(&args)
}

fn restore(data_dir: &Path, from: &Path, force: bool) -> (bool, String) {
    let mut args = vec![
        "restore",
        "--data-dir",
        path_str(data_dir),
        "--from",
        path_str(from),
    ];
    if force {
        args.push("--force");
    }
    leaseholdd(&args)
}

/// One line, our prefix, exit 1 (the caller checked the status).
fn assert_one_line_error(stderr: &str, says: &str) {
    assert!(
        stderr.starts_with("leaseholdd: error: ") && stderr.trim_end().lines().count() == 1,
        "one error line expected, got:\n{stderr}"
    );
    assert!(stderr.contains(says), "expected {says:?} in {stderr:?}");
}

fn query_one<T: rusqlite::types::FromSql>(db: &Path, sql: &str) -> T {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the backup");
    conn.query_row(sql, [], |r| r.get(0)).expect(sql)
}

/// Checkouts, heartbeats and releases on `small`, and denials on `tiny`
/// (held by `hog`), until `stop`; counts the requests answered.
fn start_load(
    s: &Server,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let base = s.base.clone();
    (0..4)
        .map(|w| {
            let (stop, done, base) = (stop.clone(), done.clone(), base.clone());
            tokio::spawn(async move {
                let c = reqwest::Client::new();
                let seats = format!("{base}/v1/licenses/small/seats");
                for round in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if w == 3 {
                        // The 1-seat pool is held: every try is a denial.
                        let r = c
                            .post(format!("{base}/v1/licenses/tiny/seats"))
                            .bearer_auth("tiny-key")
                            .json(&json!({"holder": format!("late-{round}")}))
                            .send()
                            .await
                            .expect("checkout");
                        assert_eq!(r.status(), 409);
                        done.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                    let r = c
                        .post(&seats)
                        .bearer_auth("small-key")
                        .json(&json!({"holder": format!("w{w}-{round}")}))
                        .send()
                        .await
                        .expect("checkout");
                    assert_eq!(r.status(), 201);
                    let seat: Value = r.json().await.expect("lease");
                    let seat_url =
                        format!("{seats}/{}", seat["seat_id"].as_str().expect("seat_id"));
                    for _ in 0..2 {
                        let r = c
                            .post(format!("{seat_url}/heartbeat"))
                            .bearer_auth("small-key")
                            .send()
                            .await
                            .expect("heartbeat");
                        assert_eq!(r.status(), 200);
                    }
                    // Two workers keep their first seat, so the backup has
                    // open sessions (2 held + 3 in flight = the 5 seats).
                    if round > 0 || w >= 2 {
                        let r = c
                            .delete(&seat_url)
                            .bearer_auth("small-key")
                            .send()
                            .await
                            .expect("release");
                        assert_eq!(r.status(), 204);
                    }
                    done.fetch_add(4, Ordering::Relaxed);
                }
            })
        })
        .collect()
}

/// A license's sessions over `[from, to)`, every page, with what happened
/// at or after `to` forgotten: a session open at `to` shows as open.
async fn sessions_before(s: &Server, license: &str, from: &str, to: Timestamp) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = String::new();
    loop {
        let v = s
            .admin_get(&format!(
                "/v1/admin/sessions?license={license}&from={from}&to={to}&limit=10000&after={after}"
            ))
            .await;
        for mut session in v["sessions"].as_array().expect("sessions").clone() {
            let ended = session["ended_at"]
                .as_str()
                .and_then(Timestamp::parse_rfc3339);
            if ended.is_none_or(|e| e >= to) {
                session["ended_at"] = Value::Null;
                session["end"] = Value::Null;
                session["duration_s"] = Value::Null;
            }
            out.push(session);
        }
        match v["next"].as_str() {
            Some(next) => after = next.to_string(),
            None => return out,
        }
    }
}

/// Everything the admin API says about the history before `to`.
async fn history_before(s: &Server, from: &str, to: Timestamp) -> Value {
    let mut view = json!({});
    for license in ["small", "tiny"] {
        let usage = s
            .admin_get(&format!(
                "/v1/admin/usage?license={license}&from={from}&to={to}&step=1s"
            ))
            .await;
        view[license] = json!({
            "usage": usage,
            "sessions": sessions_before(s, license, from, to).await,
        });
    }
    view
}

#[tokio::test]
async fn backup_under_load_restores_history_and_continues_event_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_with(sqlite_options(None)).await;
    let from = Timestamp::from_millis((now_ms() - 60_000) / 1000 * 1000).to_string();
    s.take_seat("tiny", "tiny-key", json!({"holder": "hog"}))
        .await;
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let load = start_load(&s, stop.clone(), done.clone());
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The backup, while the load goes on.
    let out = dir.path().join("backup.db");
    let before = done.load(Ordering::Relaxed);
    let (data_dir, out2) = (s.data_dir(), out.clone());
    let (ok, stderr) = tokio::task::spawn_blocking(move || backup(&data_dir, &out2, false))
        .await
        .expect("backup ran");
    assert!(ok, "backup failed: {stderr}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let during = done.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.expect("load task");
    }
    assert!(
        during > 50,
        "the server kept serving during and after the backup ({during} requests)"
    );
    assert_eq!(query_one::<String>(&out, "PRAGMA integrity_check"), "ok");

    // The backup instant: its newest event. Everything the server committed
    // after the snapshot happened at or after that event's time.
    let last_id: i64 = query_one(&out, "SELECT max(id) FROM events");
    let original_events = s.events().await;
    assert!(
        original_events
            .iter()
            .any(|e| e["id"].as_i64() > Some(last_id)),
        "the load went on after the backup"
    );
    let last_at = original_events
        .iter()
        .find(|e| e["id"].as_i64() == Some(last_id))
        .and_then(|e| Timestamp::parse_rfc3339(e["at"].as_str()?))
        .expect("the backup's newest event is in the original log");
    // Whole seconds, so each second's denials count whole in both.
    let to = Timestamp::from_millis(last_at.as_millis() / 1000 * 1000);
    let original = history_before(&s, &from, to).await;
    // Not an empty comparison: ended and open sessions, and denials.
    let sessions = original["small"]["sessions"].as_array().expect("sessions");
    assert!(sessions.iter().any(|x| x["end"] == "release"), "{original}");
    assert!(
        sessions.iter().any(|x| x["ended_at"].is_null()),
        "{original}"
    );
    assert!(
        original["tiny"]["usage"]["summary"]["denials"].as_u64() > Some(0),
        "{original}"
    );
    let backup_seats: i64 = query_one(&out, "SELECT count(*) FROM leases");
    s.terminate();

    // Restore into a fresh data dir; start there with a short stall
    // threshold, so the time since the backup is an outage.
    let fresh = dir.path().join("restored");
    let (ok, stderr) = restore(&fresh, &out, false);
    assert!(ok, "restore failed: {stderr}");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let started = now_ms();
    let options = sqlite_options(Some(fresh.clone()))
        .arg("--stall-threshold")
        .arg("1s");
    let r = Server::start_with(options).await;

    assert_eq!(
        history_before(&r, &from, to).await,
        original,
        "usage and sessions before the backup"
    );
    let restored_events = r.events().await;
    let expected: Vec<&Value> = original_events
        .iter()
        .filter(|e| e["id"].as_i64() <= Some(last_id))
        .collect();
    let got: Vec<&Value> = restored_events
        .iter()
        .filter(|e| e["id"].as_i64() <= Some(last_id))
        .collect();
    assert_eq!(got, expected, "the backup's events, unchanged");

    // The backup's leases, each live again for a TTL from the restart.
    let seats = r.seats(None).await;
    assert_eq!(seats.len() as i64, backup_seats);
    for seat in &seats {
        let expires = Timestamp::parse_rfc3339(seat["expires_at"].as_str().expect("expires_at"))
            .expect("time");
        assert!(
            expires.as_millis() >= started + 60_000 - 1_000,
            "outage rule extended {seat}"
        );
        assert_eq!(seat["state"], "live");
    }

    // A new event is numbered after every event of the backup.
    // (`small` may be full of the backup's seats.)
    let lease = r
        .take_seat("short", "short-key", json!({"holder": "after-restore"}))
        .await;
    let events = r.events_of("checkout").await;
    let new = events
        .iter()
        .find(|e| e["seat_id"] == lease.seat_id.as_str())
        .expect("the new checkout's event");
    assert!(
        new["id"].as_i64().expect("id") > last_id,
        "{new} after {last_id}"
    );
    assert_eq!(
        query_one::<String>(&fresh.join("leasehold.db"), "PRAGMA integrity_check"),
        "ok"
    );
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// A backup of a stopped server with one seat taken, for the refusals.
async fn stopped_server_and_backup(dir: &Path) -> (PathBuf, PathBuf) {
    let data_dir = dir.join("data");
    let mut s = Server::start_with(sqlite_options(Some(data_dir.clone()))).await;
    s.take_seat("small", "small-key", json!({"holder": "alice"}))
        .await;
    let out = dir.join("backup.db");
    let (ok, stderr) = backup(&data_dir, &out, false);
    assert!(ok, "backup failed: {stderr}");
    s.terminate();
    (data_dir, out)
}

/// A server on SQLite, what these commands are for, whatever
/// `LEASEHOLD_TEST_STORE` says; in `data_dir`, or a temp one.
fn sqlite_options(data_dir: Option<PathBuf>) -> ServerOptions {
    let mut options = ServerOptions::new(TEST_LICENSES);
    options.store = TestStore::Sqlite;
    options.data_dir = data_dir;
    options
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

#[tokio::test]
async fn refuses_files_that_are_not_leasehold_databases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a database at all\n").expect("write");
    let foreign = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&foreign).expect("create");
    conn.execute_batch("CREATE TABLE things (x INTEGER); PRAGMA user_version = 3;")
        .expect("foreign schema");
    drop(conn);
    let empty = dir.path().join("empty.db");
    drop(rusqlite::Connection::open(&empty).expect("create"));

    let target = dir.path().join("target");
    for (file, says) in [
        (&text, "is not a Leasehold database: file is not a database"),
        (
            &foreign,
            "is not a Leasehold database: it has no leases table",
        ),
        (&empty, "is not a Leasehold database: schema version 0"),
    ] {
        let (ok, stderr) = restore(&target, file, true);
        assert!(!ok, "restore of {} accepted", file.display());
        assert_one_line_error(&stderr, says);
        assert!(!target.join("leasehold.db").exists(), "nothing restored");
    }

    // backup reads only Leasehold databases too, and writes nothing else.
    let data_dir = dir.path().join("foreign-data");
    std::fs::create_dir(&data_dir).expect("mkdir");
    std::fs::copy(&foreign, data_dir.join("leasehold.db")).expect("copy");
    let out = dir.path().join("out.db");
    let (ok, stderr) = backup(&data_dir, &out, false);
    assert!(!ok);
    assert_one_line_error(&stderr, "is not a Leasehold database");
    assert!(!out.exists(), "no backup written");
    let (ok, stderr) = backup(&dir.path().join("nowhere"), &out, false);
    assert!(!ok);
    assert_one_line_error(&stderr, "no Leasehold database at");
}

#[tokio::test]
async fn refuses_a_newer_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, out) = stopped_server_and_backup(dir.path()).await;
    let version: i64 = query_one(&out, "PRAGMA user_version");
    let newer = dir.path().join("newer.db");
    std::fs::copy(&out, &newer).expect("copy");
    let conn = rusqlite::Connection::open(&newer).expect("open");
    conn.pragma_update(None, "user_version", version + 1)
        .expect("bump");
    drop(conn);

    let target = dir.path().join("target");
    let (ok, stderr) = restore(&target, &newer, true);
    assert!(!ok, "a newer schema restored");
    assert_one_line_error(
        &stderr,
        &format!(
            "has schema version {}, newer than this leaseholdd understands ({version})",
            version + 1
        ),
    );
    assert!(!target.join("leasehold.db").exists(), "nothing restored");
}

#[tokio::test]
async fn refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data_dir, out) = stopped_server_and_backup(dir.path()).await;
    let db = data_dir.join("leasehold.db");
    let (db_before, out_before) = (bytes(&db), bytes(&out));

    // backup: an existing --out stays as it was.
    let (ok, stderr) = backup(&data_dir, &out, false);
    assert!(!ok);
    assert_one_line_error(&stderr, "already exists (--force replaces it)");
    assert_eq!(bytes(&out), out_before);

    // restore: an existing database stays as it was.
    let other = dir.path().join("other.db");
    std::fs::copy(&out, &other).expect("copy");
    let conn = rusqlite::Connection::open(&other).expect("open");
    conn.execute("DELETE FROM leases", []).expect("empty it");
    drop(conn);
    let (ok, stderr) = restore(&data_dir, &other, false);
    assert!(!ok);
    assert_one_line_error(&stderr, "already exists (--force replaces it)");
    assert_eq!(bytes(&db), db_before);

    // With --force both replace, and a stale WAL goes with the old database.
    std::fs::write(data_dir.join("leasehold.db-wal"), b"stale").expect("stale wal");
    let (ok, stderr) = restore(&data_dir, &other, true);
    assert!(ok, "restore --force: {stderr}");
    assert!(
        !data_dir.join("leasehold.db-wal").exists(),
        "stale WAL removed"
    );
    assert_eq!(query_one::<i64>(&db, "SELECT count(*) FROM leases"), 0);
    let (ok, stderr) = backup(&data_dir, &out, true);
    assert!(ok, "backup --force: {stderr}");
    assert_eq!(query_one::<i64>(&out, "SELECT count(*) FROM leases"), 0);
    assert_eq!(query_one::<String>(&out, "PRAGMA integrity_check"), "ok");
}

#[tokio::test]
async fn refuses_to_restore_under_a_running_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data_dir, out) = stopped_server_and_backup(dir.path()).await;
    let s = Server::start_with(sqlite_options(Some(data_dir.clone()))).await;
    let seats_before = s.seats(None).await;

    let (ok, stderr) = restore(&data_dir, &out, true);
    assert!(!ok, "restored under a running server");
    assert_one_line_error(&stderr, "is in use by a running leaseholdd: stop it first");
    assert_eq!(s.seats(None).await, seats_before);
    s.take_seat("small", "small-key", json!({"holder": "bob"}))
        .await;
}

#[tokio::test]
async fn restored_database_belongs_to_the_data_dirs_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, out) = stopped_server_and_backup(dir.path()).await;
    assert_eq!(
        std::fs::metadata(&out)
            .expect("backup")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    // A service's state directory, owned by its user (nobody here); the
    // restore runs as root.
    let target = dir.path().join("state");
    std::fs::create_dir(&target).expect("mkdir");
    require_tool(
        Command::new("chown").arg("65534:65534").arg(&target),
        "giving a directory to another user",
        "run the tests as root",
    );
    let (ok, stderr) = restore(&target, &out, false);
    assert!(ok, "restore failed: {stderr}");
    let db = std::fs::metadata(target.join("leasehold.db")).expect("restored");
    assert_eq!((db.uid(), db.gid()), (65534, 65534));
    assert_eq!(db.permissions().mode() & 0o777, 0o600);
}

/// `leaseholdd kid` prints the `kid` the server's JWKS publishes (what a
/// customer sends a vendor for a bound entitlement); a data dir restored
/// from a backup alone has no `signing.key`, so it gets a new `kid`.
#[tokio::test]
async fn kid_is_the_servers_and_a_data_dir_without_its_key_gets_another() {
    let kid_of = |dir: &Path| {
        let out = Command::new(leasehold_tests::leaseholdd_bin())
            .args(["kid", "--data-dir", path_str(dir)])
            .env_remove("LEASEHOLD_DATA_DIR")
            .output()
            .expect("run leaseholdd kid");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let s = Server::start(TEST_LICENSES).await;
    let jwks: Value = s
        .client()
        .get(s.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kid = kid_of(&s.data_dir());
    assert_eq!(jwks["keys"][0]["kid"], json!(kid));
    assert_eq!(kid_of(&s.data_dir()), kid, "the same key, read again");

    let fresh = tempfile::tempdir().unwrap();
    let restored = fresh.path().join("restored");
    let other = kid_of(&restored);
    assert_ne!(other, kid);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(restored.join("signing.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "a new key only its owner reads");
}
