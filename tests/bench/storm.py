#!/usr/bin/env python3
"""A retry storm: one holder + fingerprint refused at RATE checkouts a second
for SECS seconds (paced, THREADS keep-alive connections, loopback only).
    storm.py HOST:PORT LICENSE KEY RATE SECS [THREADS]
Prints: sent, per-status counts, achieved rate."""
import http.client, json, sys, threading, time
addr, lic, key, rate, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
threads = int(sys.argv[6]) if len(sys.argv) > 6 else 8
host, port = addr.rsplit(":", 1)
assert host in ("127.0.0.1", "localhost")
body = json.dumps({"holder": "storm", "fingerprint": "loop"})
hdrs = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
counts, lock = {}, threading.Lock()
start = time.monotonic() + 0.2
end = start + secs
def run(i):
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    period = threads / rate
    nxt = start + i * period / threads
    local = {}
    while True:
        now = time.monotonic()
        if nxt >= end:
            break
        if nxt > now:
            time.sleep(nxt - now)
        nxt += period
        try:
            c.request("POST", f"/v1/licenses/{lic}/seats", body, hdrs)
            r = c.getresponse(); r.read()
            local[r.status] = local.get(r.status, 0) + 1
        except Exception as e:
            local[type(e).__name__] = local.get(type(e).__name__, 0) + 1
            c = http.client.HTTPConnection(host, int(port), timeout=10)
    with lock:
        for k, v in local.items():
            counts[k] = counts.get(k, 0) + v
ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
took = time.monotonic() - start
n = sum(counts.values())
print(json.dumps({"sent": n, "statuses": {str(k): v for k, v in counts.items()}, "secs": round(took, 2), "rate": round(n / took, 1)}))
