#!/usr/bin/env python3
"""Append retry storms to a Leasehold SQLite database's refusals: STORMS
times over the last year, one holder (of seed-sessions.py's 300 names, with
its fingerprint) refused for want of a seat every EVERY_S seconds for
MINUTES minutes, written straight into the `denials` table in its packed
form (one row per second, 2-byte millisecond offsets; see
server/src/store/denials.rs). Used by BENCHMARKS.md, "What-if with retry
storms", on top of seed-sessions.py's year.

    python3 tests/bench/seed-storms.py DATA_DIR/leasehold.db [STORMS] [EVERY_S] [MINUTES] [LICENSE]
"""
import random
import sqlite3
import sys
import time

db = sys.argv[1]
storms = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
every_s = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
minutes = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
license_id = sys.argv[5] if len(sys.argv) > 5 else "bench-big"
rng = random.Random(7)
now = int(time.time() * 1000)
year = 365 * 86_400_000
names = [f"user-{i:03d}" for i in range(300)]

# (second, holder, fingerprint) -> offsets, so two storms in one second share a row.
rows = {}
refusals = 0
for _ in range(storms):
    holder = rng.choice(names)
    fingerprint = f"{holder}-pc"
    at = now - rng.randrange(year)
    for i in range(int(minutes * 60 / every_s)):
        t = at + int(i * every_s * 1000) + rng.randrange(200)
        if t >= now:
            break
        key = (t // 1000 * 1000, holder, fingerprint)
        rows.setdefault(key, bytearray()).extend((t % 1000).to_bytes(2, "big"))
        refusals += 1

conn = sqlite3.connect(db)
with conn:
    conn.executemany(
        """INSERT INTO denials (license_id, second_ms, holder, fingerprint, reason, count, offsets)
           VALUES (?, ?, ?, ?, 'full', ?, ?)
           ON CONFLICT (license_id, second_ms, holder, fingerprint, reason) DO UPDATE
           SET count = count + excluded.count, offsets = offsets || excluded.offsets""",
        ((license_id, s, h, f, len(o) // 2, bytes(o)) for (s, h, f), o in rows.items()),
    )
print(f"{refusals} refusals in {storms} storms, {len(rows)} rows")
