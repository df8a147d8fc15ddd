#!/usr/bin/env python3
"""Append N closed usage-history sessions of one license to a Leasehold
SQLite database, straight into its `sessions` table (a million through
checkouts would take most of an hour). The schema must exist: start and
stop `leaseholdd` on the data dir once first. Used by BENCHMARKS.md,
"Backup while serving".

    python3 tests/bench/seed-sessions.py DATA_DIR/leasehold.db [N] [LICENSE]
"""
import random
import sqlite3
import sys
import time

db, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
license_id = sys.argv[3] if len(sys.argv) > 3 else "bench-big"
rng = random.Random(1)
now = int(time.time() * 1000)
year = 365 * 86_400_000
names = [f"user-{i:03d}" for i in range(300)]
conn = sqlite3.connect(db)
version = conn.execute("PRAGMA user_version").fetchone()[0]
if version < 7:
    sys.exit(f"{db}: schema version {version}; start leaseholdd on it once first")
# Insertion order is start order, as the server writes them.
starts = sorted(now - rng.randrange(year) for _ in range(n))


def rows():
    for start in starts:
        holder = rng.choice(names)
        end = min(start + rng.randrange(20 * 60_000, 6 * 3_600_000), now - 1)
        kind = rng.choices(["release", "lapse", "revoke"], [85, 10, 5])[0]
        fingerprint = f"{holder}-pc" if rng.random() < 0.75 else None
        yield ("%032x" % rng.getrandbits(128), license_id, holder, fingerprint,
               start, end, kind)


with conn:
    conn.executemany(
        "INSERT INTO sessions (seat_id, license_id, holder, fingerprint,"
        " started_at, ended_at, end_kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows(),
    )
print(conn.execute("SELECT count(*) FROM sessions").fetchone()[0], "sessions in", db)
