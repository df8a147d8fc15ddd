#!/usr/bin/env python3
"""The what-if of one license over the last year, timed on two builds of
leaseholdd in alternating order on the same SQLite data dir (one server at
a time, loopback only): per request the server's CPU (utime + stime from
/proc/PID/stat) and the wall time, and the answer's headline. Used by
BENCHMARKS.md, "What-if with retry storms".

    what_if_pairs.py DATA_DIR LICENSES_TOML LICENSE ROUNDS BUILD_A BUILD_B [QUERY]

QUERY is appended to the request (e.g. "&idle_timeout=30m")."""
import http.client
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

data_dir, licenses, license_id, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
builds = sys.argv[5:7]
extra = sys.argv[7] if len(sys.argv) > 7 else ""
TOKEN = "what-if-pairs-admin-token-0123456789"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start(binary):
    env = dict(os.environ, LEASEHOLD_ADMIN_TOKEN=TOKEN, LEASEHOLD_LOG="info")
    p = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--licenses", licenses],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"listening on http://(\S+)", line)
        if m:
            return p, m.group(1)
    raise SystemExit(f"{binary} did not start")


def what_if(addr, pid):
    host, port = addr.rsplit(":", 1)
    assert host in ("127.0.0.1", "localhost")
    to = datetime.now(timezone.utc).replace(microsecond=0)
    frm = to - timedelta(days=366)
    path = (f"/v1/admin/usage/what-if?license={license_id}"
            f"&from={frm:%Y-%m-%dT%H:%M:%SZ}&to={to:%Y-%m-%dT%H:%M:%SZ}{extra}")
    c = http.client.HTTPConnection(host, int(port), timeout=600)
    cpu0, t0 = cpu_s(pid), time.monotonic()
    c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    r = c.getresponse()
    body = r.read()
    wall, cpu = time.monotonic() - t0, cpu_s(pid) - cpu0
    assert r.status == 200, (r.status, body[:300])
    return wall, cpu, json.loads(body)


for i in range(rounds):
    order = builds if i % 2 == 0 else builds[::-1]
    for binary in order:
        p, addr = start(binary)
        try:
            what_if(addr, p.pid)  # warm the page cache
            wall, cpu, a = what_if(addr, p.pid)
        finally:
            p.terminate()
            p.wait()
        rec = a.get("recommended") or {}
        print(f"round {i} {binary}: cpu {cpu:.2f} s wall {wall:.2f} s; requests {a['requests']}, "
              f"true_denials {a['true_denials']}, episodes {a.get('episodes', '-')}, "
              f"recommended {rec.get('seats')} at {rec.get('denial_rate', 0):.3f} %, "
              f"{len(a['curve'])} seat counts", flush=True)
