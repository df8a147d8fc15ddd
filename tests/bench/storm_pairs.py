#!/usr/bin/env python3
"""Retry storm recorded (R) vs refused before the store (U) vs quiet (Q),
two leaseholdd builds paired per round (issue 31, commit "memo" vs its parent).

    storm_pairs.py run BASE_DIR MEMO_DIR OUT_DIR [--rounds N] [--start R] [--storm PATH]
    storm_pairs.py summarize OUT_DIR

BASE_DIR / MEMO_DIR each hold `leaseholdd` and `leasehold-bench` (release).
`--storm` defaults to tests/bench/storm.py next to this script's repo root
or in the current directory.

Per round r (odd: base first, even: memo first), per build: fresh data dir,
fresh server on 127.0.0.1:0, the one-seat license `storm` taken by "owner",
then checkout windows in order (r mod 6) of QRU RUQ UQR QUR URQ RQU:
  Q: leasehold-bench alone; R: storm.py 1000/s 5.6 s 16 threads refused 409;
  U: the same storm with a wrong key (401). Bench: --connections 32
  --scenario checkout --warmup 1s --duration 4s.
then a quiet heartbeat window (same options), then storm-only windows of 4 s
with no bench: SI (idle), SR, SU: server CPU from /proc/PID/stat, /proc/PID/io.
/metrics writer counters are read around every window. Loopback only.
Raw JSON per window in OUT_DIR/raw/.
"""
import argparse, glob, http.client, json, os, re, shutil, signal, statistics
import subprocess, sys, tempfile, time

ORDERS = ["QRU", "RUQ", "UQR", "QUR", "URQ", "RQU"]
STORM_KEY = "storm-key-0123456789"
WRONG_KEY = "wrong-key-0123456789x"
ADMIN = "bench-admin-token-0123456789"
STORM_LICENSE = """
[[license]]
id = "storm"
key = "storm-key-0123456789"
seats = 1
ttl = "600s"
"""
CLK = os.sysconf("SC_CLK_TCK")
COUNTERS = ["leasehold_store_batches_total", "leasehold_store_commands_total",
            "leasehold_store_apply_seconds_total", "leasehold_store_commit_seconds_total",
            "leasehold_store_refusals_repeated_total"]


# ---------------------------------------------------------------- helpers
def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


def proc_cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read()
    rest = f[f.rindex(")") + 2:].split()
    return int(rest[11]) + int(rest[12])  # utime, stime (fields 14, 15)


def proc_io(pid):
    d = {}
    for line in open(f"/proc/{pid}/io"):
        k, v = line.split(":")
        d[k.strip()] = int(v)
    return d


def all_procs():
    """pid -> (comm, ticks) of every process (children's CPU not included)."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            f = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        comm = f[f.index("(") + 1:f.rindex(")")]
        rest = f[f.rindex(")") + 2:].split()
        out[int(p)] = (comm, int(rest[11]) + int(rest[12]))
    return out


def top_delta(before, after, secs, n=6):
    rows = []
    for pid, (comm, t) in after.items():
        t0 = before.get(pid, (comm, 0))[1] if pid in before else 0
        d = (t - t0) / CLK / secs
        if d > 0.005:
            rows.append((round(d, 3), pid, comm))
    rows.sort(reverse=True)
    return [{"cores": c, "pid": p, "comm": m} for c, p, m in rows[:n]]


def metrics(addr):
    h, p = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(h, int(p), timeout=10)
    c.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    vals = {}
    for name in COUNTERS:
        m = re.search(rf"^{name}(?:{{[^}}]*}})?\s+([0-9.eE+-]+)\s*$", text, re.M)
        vals[name] = float(m.group(1)) if m else None
    return vals


def mdelta(a, b, secs):
    d = {}
    for k in COUNTERS:
        if a.get(k) is None or b.get(k) is None:
            d[k] = None
        else:
            d[k] = b[k] - a[k]
    bt, cm = d["leasehold_store_batches_total"], d["leasehold_store_commands_total"]
    return {
        "secs": round(secs, 3),
        "delta": d,
        "batches_per_s": bt / secs if bt is not None else None,
        "commands_per_batch": (cm / bt) if bt else None,
        "commands_per_s": cm / secs if cm is not None else None,
        "apply_ms_per_s": d["leasehold_store_apply_seconds_total"] * 1000 / secs
        if d["leasehold_store_apply_seconds_total"] is not None else None,
        "commit_ms_per_s": d["leasehold_store_commit_seconds_total"] * 1000 / secs
        if d["leasehold_store_commit_seconds_total"] is not None else None,
        "refusals_repeated_per_s": d["leasehold_store_refusals_repeated_total"] / secs
        if d["leasehold_store_refusals_repeated_total"] is not None else None,
    }


def post_seat(addr, holder, fp):
    h, p = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(h, int(p), timeout=10)
    c.request("POST", "/v1/licenses/storm/seats",
              json.dumps({"holder": holder, "fingerprint": fp}),
              {"Authorization": f"Bearer {STORM_KEY}", "Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body.decode(errors="replace")[:300]


# ---------------------------------------------------------------- one server
class Server:
    def __init__(self, bindir, licenses, logpath, scratch):
        self.data = tempfile.mkdtemp(prefix="lh-data-", dir=scratch)
        self.log = open(logpath, "w")
        env = dict(os.environ, LEASEHOLD_ADMIN_TOKEN=ADMIN)
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "leaseholdd"), "--listen", "127.0.0.1:0",
             "--data-dir", self.data, "--licenses", licenses],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.pid = self.proc.pid
        self.addr = None
        for _ in range(200):
            time.sleep(0.05)
            m = re.search(r"listening on http://([0-9.]+:[0-9]+)", open(logpath).read())
            if m:
                self.addr = m.group(1)
                break
            if self.proc.poll() is not None:
                break
        if not self.addr:
            self.stop()
            raise RuntimeError("server did not start: " + open(logpath).read()[-2000:])
        assert self.addr.startswith("127.0.0.1:")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)


def run_storm(storm, addr, key, secs):
    return subprocess.Popen([sys.executable, storm, addr, "storm", key, "1000", str(secs), "16"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def storm_result(p):
    out, err = p.communicate(timeout=60)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except Exception:
        return {"error": (out + err)[-500:]}


def bench_window(bindir, srv, scenario, jsonpath, storm, key, storm_secs=5.6):
    m0 = metrics(srv.addr)
    p0 = all_procs()
    w0 = time.monotonic()
    load = loadavg()
    sp = run_storm(storm, srv.addr, key, storm_secs) if key else None
    env = dict(os.environ, LEASEHOLD_ADMIN_TOKEN=ADMIN)
    b = subprocess.run([os.path.join(bindir, "leasehold-bench"), "--server", f"http://{srv.addr}",
                        "--server-pid", str(srv.pid), "--connections", "32",
                        "--scenario", scenario, "--warmup", "1s", "--duration", "4s",
                        "--json", jsonpath], capture_output=True, text=True, env=env)
    w1 = time.monotonic()
    p1 = all_procs()
    m1 = metrics(srv.addr)
    st = storm_result(sp) if sp else None
    res = {"load1": load, "bench_rc": b.returncode, "bench_stderr": b.stderr[-1500:],
           "storm": st, "metrics": mdelta(m0, m1, w1 - w0),
           "top": top_delta(p0, p1, w1 - w0)}
    if b.returncode != 0:
        res["bench_stdout"] = b.stdout[-2000:]
    return res


def storm_only(srv, storm, key, secs=4.0):
    load = loadavg()
    m0 = metrics(srv.addr)
    p0 = all_procs()
    c0, io0, t0 = proc_cpu_ticks(srv.pid), proc_io(srv.pid), time.monotonic()
    if key:
        sp = run_storm(storm, srv.addr, key, secs)
        st = storm_result(sp)
    else:
        time.sleep(secs)
        st = None
    c1, io1, t1 = proc_cpu_ticks(srv.pid), proc_io(srv.pid), time.monotonic()
    p1 = all_procs()
    m1 = metrics(srv.addr)
    w = t1 - t0
    return {"load1": load, "secs": round(w, 3), "cpu_s": (c1 - c0) / CLK,
            "cores": (c1 - c0) / CLK / w, "storm": st,
            "io": {k: io1[k] - io0[k] for k in io0},
            "metrics": mdelta(m0, m1, w), "top": top_delta(p0, p1, w)}


def one_server(build, bindir, rnd, order, out, storm, scratch):
    raw = os.path.join(out, "raw")
    lic = os.path.join(out, f"licenses-{build}.toml")
    srv = Server(bindir, lic, os.path.join(out, "logs", f"r{rnd:02d}-{build}.log"), scratch)
    meta = {"round": rnd, "build": build, "order": order, "addr": srv.addr, "pid": srv.pid,
            "windows": {}, "flags": []}
    try:
        s1 = post_seat(srv.addr, "owner", "own")
        s2 = post_seat(srv.addr, "storm", "loop")
        meta["setup"] = [s1[0], s2[0]]
        if s1[0] != 201 or s2[0] != 409:
            meta["flags"].append(f"setup statuses {s1} {s2}")
        for cond in order:
            key = {"Q": None, "R": STORM_KEY, "U": WRONG_KEY}[cond]
            jp = os.path.join(raw, f"r{rnd:02d}-{build}-{cond}.json")
            meta["windows"][cond] = bench_window(bindir, srv, "checkout", jp, storm, key)
            time.sleep(0.3)
        jp = os.path.join(raw, f"r{rnd:02d}-{build}-QH.json")
        meta["windows"]["QH"] = bench_window(bindir, srv, "heartbeat", jp, storm, None)
        time.sleep(0.3)
        for cond, key in (("SI", None), ("SR", STORM_KEY), ("SU", WRONG_KEY)):
            meta["windows"][cond] = storm_only(srv, storm, key)
            time.sleep(0.3)
    finally:
        srv.stop()
    # checks
    for cond, w in meta["windows"].items():
        st = w.get("storm")
        if st is not None:
            want = {"R": "409", "U": "401", "SR": "409", "SU": "401"}[cond]
            if "statuses" not in st or set(st["statuses"]) != {want}:
                meta["flags"].append(f"{cond} storm statuses {st}")
        if cond in ("Q", "R", "U", "QH"):
            if w["bench_rc"] != 0:
                meta["flags"].append(f"{cond} bench rc {w['bench_rc']}")
                continue
            j = json.load(open(os.path.join(raw, f"r{rnd:02d}-{build}-{cond}.json")))
            s = j["scenarios"][-1]
            w["result"] = {"throughput": s["throughput_rps"], "p50": s["latency_ms"]["p50"],
                           "p99": s["latency_ms"]["p99"], "errors": s["errors_total"],
                           "statuses": s["statuses"], "server_cores": s.get("server_cpu_cores"),
                           "other_cores": s.get("other_cores"), "bench_cores": s.get("bench_cpu_cores")}
            want = "200" if cond == "QH" else "201"
            if s["errors_total"] or set(map(str, s["statuses"])) - {want}:
                meta["flags"].append(f"{cond} bench statuses {s['statuses']} errors {s['errors']}")
    json.dump(meta, open(os.path.join(raw, f"r{rnd:02d}-{build}-meta.json"), "w"), indent=1)
    return meta


def run(a):
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    storm = a.storm
    if not storm:
        here = os.path.dirname(os.path.abspath(__file__))
        for c in (os.path.join(here, "storm.py"), os.path.join(here, "..", "..", "tests", "bench", "storm.py"),
                  os.path.join("tests", "bench", "storm.py")):
            if os.path.exists(c):
                storm = c
                break
    assert storm and os.path.exists(storm), "storm.py not found: pass --storm"
    bins = {"base": os.path.abspath(a.base), "memo": os.path.abspath(a.memo)}
    for b, d in bins.items():
        p = subprocess.run([os.path.join(d, "leasehold-bench"), "--print-licenses"],
                           capture_output=True, text=True, check=True)
        open(os.path.join(out, f"licenses-{b}.toml"), "w").write(p.stdout + STORM_LICENSE)
    scratch = a.scratch or None
    for rnd in range(a.start, a.start + a.rounds):
        order = ORDERS[rnd % 6]
        builds = ["base", "memo"] if rnd % 2 == 1 else ["memo", "base"]
        for b in builds:
            t = time.time()
            m = one_server(b, bins[b], rnd, order, out, storm, scratch)
            w = m["windows"]
            line = " ".join(f"{c}={w[c]['result']['throughput']:.0f}/{w[c]['result']['p99']:.1f}"
                            for c in ("Q", "R", "U", "QH") if "result" in w[c])
            print(f"r{rnd:02d} {b} {order} {line} SR={w['SR']['cores']:.2f} SU={w['SU']['cores']:.2f} "
                  f"SI={w['SI']['cores']:.2f} load={w['Q']['load1']:.2f} {time.time()-t:.0f}s "
                  f"flags={m['flags']}", flush=True)


# ---------------------------------------------------------------- summary
def q(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    if len(xs) == 1:
        return (xs[0],) * 5
    qs = statistics.quantiles(xs, n=4, method="inclusive")
    return (statistics.median(xs), qs[0], qs[2], xs[0], xs[-1])


def fmt(t, d=2):
    if t is None:
        return "n/a"
    return f"{t[0]:.{d}f} ({t[1]:.{d}f}–{t[2]:.{d}f}; {t[3]:.{d}f}–{t[4]:.{d}f})"


def summarize(a):
    out = a.out
    metas = {}
    for f in sorted(glob.glob(os.path.join(out, "raw", "r*-meta.json"))):
        m = json.load(open(f))
        metas[(m["round"], m["build"])] = m
    rounds = sorted({r for r, _ in metas})
    L = []
    P = L.append

    def res(r, b, c, k):
        w = metas[(r, b)]["windows"][c]
        return w["result"][k] if "result" in w else None

    P(f"Rounds: {len(rounds)} ({rounds[0]}–{rounds[-1]}); servers: {len(metas)}\n")
    P("### 1. Per build: median (IQR; min–max)\n")
    P("| figure | base | memo |\n|---|---|---|")
    per = {}
    for b in ("base", "memo"):
        rs = [r for r in rounds if (r, b) in metas]
        d = {}
        for c in ("R", "U", "Q", "QH"):
            d[c + "thr"] = [res(r, b, c, "throughput") for r in rs]
            d[c + "p99"] = [res(r, b, c, "p99") for r in rs]
            d[c + "p50"] = [res(r, b, c, "p50") for r in rs]
        d["RU"] = [x / y for x, y in zip(d["Rthr"], d["Uthr"])]
        d["RUp99"] = [x / y for x, y in zip(d["Rp99"], d["Up99"])]
        d["RQ"] = [x / y for x, y in zip(d["Rthr"], d["Qthr"])]
        d["UQ"] = [x / y for x, y in zip(d["Uthr"], d["Qthr"])]
        d["RltU"] = sum(1 for x in d["RU"] if x < 1)
        d["n"] = len(rs)
        per[b] = d
    rows = [("R ckout/s", "Rthr", 0), ("U ckout/s", "Uthr", 0), ("Q ckout/s", "Qthr", 0),
            ("Q heartbeat/s", "QHthr", 0),
            ("R p99 ms", "Rp99", 1), ("U p99 ms", "Up99", 1), ("Q p99 ms", "Qp99", 1),
            ("Q heartbeat p99 ms", "QHp99", 1),
            ("**R/U throughput**", "RU", 3), ("**R/U p99**", "RUp99", 3),
            ("R/Q throughput", "RQ", 3), ("U/Q throughput", "UQ", 3)]
    for name, k, dg in rows:
        P(f"| {name} | {fmt(q(per['base'][k]), dg)} | {fmt(q(per['memo'][k]), dg)} |")
    P(f"| R<U (rounds) | {per['base']['RltU']}/{per['base']['n']} | {per['memo']['RltU']}/{per['memo']['n']} |")
    for label, first in (("R window before U (RUQ, RQU, QRU)", True), ("U window before R (UQR, URQ, QUR)", False)):
        cells = []
        for b in ("base", "memo"):
            rs = [r for r in rounds if (r, b) in metas]
            xs = [x for r, x in zip(rs, per[b]["RU"])
                  if (metas[(r, b)]["order"].index("R") < metas[(r, b)]["order"].index("U")) == first]
            t = q(xs)
            cells.append(f"{fmt(t, 3)}, R<U {sum(1 for x in xs if x < 1)}/{len(xs)}")
        P(f"| R/U throughput, {label} | {cells[0]} | {cells[1]} |")

    P("\n### 2. Paired memo/base per round: median (IQR; min–max), memo better in k/N\n")
    P("| figure | memo/base | memo better |\n|---|---|---|")
    paired = [("R ckout/s", "R", "throughput", True), ("R p99", "R", "p99", False),
              ("U ckout/s", "U", "throughput", True), ("U p99", "U", "p99", False),
              ("Q ckout/s", "Q", "throughput", True), ("Q ckout p99", "Q", "p99", False),
              ("Q heartbeat/s", "QH", "throughput", True), ("Q heartbeat p99", "QH", "p99", False)]
    both = [r for r in rounds if (r, "base") in metas and (r, "memo") in metas]
    for name, c, k, hi in paired:
        rat = [res(r, "memo", c, k) / res(r, "base", c, k) for r in both]
        better = sum(1 for x in rat if (x > 1 if hi else x < 1))
        P(f"| {name} | {fmt(q(rat), 3)} | {better}/{len(rat)} |")
    rat = [(res(r, "memo", "R", "throughput") / res(r, "memo", "U", "throughput")) /
           (res(r, "base", "R", "throughput") / res(r, "base", "U", "throughput")) for r in both]
    P(f"| (R/U) throughput | {fmt(q(rat), 3)} | {sum(1 for x in rat if x > 1)}/{len(rat)} |")

    P("\n### 3. Storm-only windows (4 s, no bench)\n")
    P("| figure | base | memo |\n|---|---|---|")
    so = {}
    for b in ("base", "memo"):
        rs = [r for r in rounds if (r, b) in metas]
        d = {"SIc": [], "SRc": [], "SUc": [], "Rus": [], "Uus": [], "RUus": [],
             "Rsent": [], "Usent": [], "Rrate": [], "Urate": [],
             "Rsyscw": [], "Usyscw": [], "Rwb": [], "Uwb": [], "Isyscw": [], "Iwb": [],
             "Rsyscw_raw": [], "Usyscw_raw": [], "Rwb_raw": [], "Uwb_raw": []}
        for r in rs:
            w = metas[(r, b)]["windows"]
            si = w["SI"]["cores"]
            d["SIc"].append(si)
            d["Isyscw"].append(w["SI"]["io"]["syscw"] / w["SI"]["secs"])
            d["Iwb"].append(w["SI"]["io"]["write_bytes"] / w["SI"]["secs"])
            us = {}
            for c, t in (("SR", "R"), ("SU", "U")):
                x = w[c]
                sent = x["storm"]["sent"]
                d[c + "c"].append(x["cores"])
                us[t] = (x["cores"] - si) * x["secs"] / sent * 1e6
                d[t + "us"].append(us[t])
                d[t + "sent"].append(sent)
                d[t + "rate"].append(x["storm"]["rate"])
                idle_sc = w["SI"]["io"]["syscw"] / w["SI"]["secs"] * x["secs"]
                idle_wb = w["SI"]["io"]["write_bytes"] / w["SI"]["secs"] * x["secs"]
                d[t + "syscw"].append((x["io"]["syscw"] - idle_sc) / sent)
                d[t + "wb"].append((x["io"]["write_bytes"] - idle_wb) / sent)
                d[t + "syscw_raw"].append(x["io"]["syscw"] / sent)
                d[t + "wb_raw"].append(x["io"]["write_bytes"] / sent)
            d["RUus"].append(us["R"] - us["U"])
        so[b] = d
    for name, k, dg in [("server cores SI (idle)", "SIc", 3), ("server cores SR", "SRc", 3),
                        ("server cores SU", "SUc", 3), ("storm rate SR /s", "Rrate", 0),
                        ("storm rate SU /s", "Urate", 0),
                        ("µs server CPU per refusal R", "Rus", 1), ("µs per refusal U", "Uus", 1),
                        ("**R−U µs**", "RUus", 1),
                        ("write syscalls/request R (raw)", "Rsyscw_raw", 3),
                        ("write syscalls/request U (raw)", "Usyscw_raw", 3),
                        ("bytes to disk/request R (raw)", "Rwb_raw", 1),
                        ("bytes to disk/request U (raw)", "Uwb_raw", 1),
                        ("write syscalls/request R (−idle)", "Rsyscw", 3),
                        ("write syscalls/request U (−idle)", "Usyscw", 3),
                        ("bytes to disk/request R (−idle)", "Rwb", 1),
                        ("bytes to disk/request U (−idle)", "Uwb", 1),
                        ("idle write syscalls/s", "Isyscw", 2), ("idle bytes to disk/s", "Iwb", 0)]:
        P(f"| {name} | {fmt(q(so['base'][k]), dg)} | {fmt(q(so['memo'][k]), dg)} |")
    rat = [so["memo"]["RUus"][i] for i in range(len(both))]

    P("\n### 4. Writer counters (medians over rounds, per second of window incl. the bench's 1 s warm-up)\n")
    P("| build | cond | batches/s | commands/batch | commands/s | apply ms/s | commit ms/s | refusals repeated/s |\n|---|---|---|---|---|---|---|---|")
    for b in ("base", "memo"):
        rs = [r for r in rounds if (r, b) in metas]
        for c in ("Q", "R", "U", "QH", "SI", "SR", "SU"):
            vals = {}
            for k in ("batches_per_s", "commands_per_batch", "commands_per_s", "apply_ms_per_s",
                      "commit_ms_per_s", "refusals_repeated_per_s"):
                xs = [metas[(r, b)]["windows"][c]["metrics"][k] for r in rs]
                t = q(xs)
                vals[k] = "n/a" if t is None else f"{t[0]:.2f}" if k != "batches_per_s" and k != "commands_per_s" else f"{t[0]:.0f}"
            P(f"| {b} | {c} | {vals['batches_per_s']} | {vals['commands_per_batch']} | {vals['commands_per_s']} | "
              f"{vals['apply_ms_per_s']} | {vals['commit_ms_per_s']} | {vals['refusals_repeated_per_s']} |")

    P("\n### 5. Noise\n")
    P("| build | cond | load 1m median (min–max) | bench 'others' cores median (min–max) | server cores median |\n|---|---|---|---|---|")
    for b in ("base", "memo"):
        rs = [r for r in rounds if (r, b) in metas]
        for c in ("Q", "R", "U", "QH"):
            ls = [metas[(r, b)]["windows"][c]["load1"] for r in rs]
            oc = [res(r, b, c, "other_cores") for r in rs]
            sc = [res(r, b, c, "server_cores") for r in rs]
            tl, to, ts = q(ls), q(oc), q(sc)
            P(f"| {b} | {c} | {tl[0]:.2f} ({tl[3]:.2f}–{tl[4]:.2f}) | "
              f"{'n/a' if to is None else f'{to[0]:.2f} ({to[3]:.2f}–{to[4]:.2f})'} | "
              f"{'n/a' if ts is None else f'{ts[0]:.2f}'} |")
    # processes other than server/bench/storm that used CPU
    others = {}
    for m in metas.values():
        for c, w in m["windows"].items():
            for t in w.get("top", []):
                if t["pid"] == m["pid"] or t["comm"] in ("leasehold-bench", "python3"):
                    continue
                others.setdefault(t["comm"], []).append(t["cores"])
    P("\nOther processes seen among the top CPU users of a window (comm: windows seen, max cores):")
    for comm, xs in sorted(others.items(), key=lambda kv: -max(kv[1]))[:12]:
        P(f"- {comm}: {len(xs)} windows, max {max(xs):.2f} cores, median {statistics.median(xs):.2f}")

    P("\n### Per round\n")
    P("| round | order | first | build | Q ckout/s · p99 | R ckout/s · p99 | U ckout/s · p99 | QH hb/s · p99 | R/U thr | R/U p99 | storm R/U /s | SR/SU/SI cores | load Q/R/U | flags |")
    P("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rounds:
        for b in (["base", "memo"] if r % 2 == 1 else ["memo", "base"]):
            if (r, b) not in metas:
                continue
            m = metas[(r, b)]
            w = m["windows"]
            cell = lambda c: f"{res(r, b, c, 'throughput'):.0f} · {res(r, b, c, 'p99'):.1f}"
            P(f"| {r} | {m['order']} | {'base' if r % 2 == 1 else 'memo'} | {b} | {cell('Q')} | {cell('R')} | {cell('U')} | {cell('QH')} | "
              f"{res(r, b, 'R', 'throughput') / res(r, b, 'U', 'throughput'):.3f} | "
              f"{res(r, b, 'R', 'p99') / res(r, b, 'U', 'p99'):.3f} | "
              f"{w['R']['storm']['rate']:.0f} / {w['U']['storm']['rate']:.0f} | "
              f"{w['SR']['cores']:.2f}/{w['SU']['cores']:.2f}/{w['SI']['cores']:.2f} | "
              f"{w['Q']['load1']:.2f}/{w['R']['load1']:.2f}/{w['U']['load1']:.2f} | {'; '.join(m['flags']) or '–'} |")
    text = "\n".join(L) + "\n"
    open(os.path.join(out, "tables.md"), "w").write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = ap.add_subparsers(dest="cmd", required=True)
    r = sp.add_parser("run")
    r.add_argument("base"); r.add_argument("memo"); r.add_argument("out")
    r.add_argument("--rounds", type=int, default=12)
    r.add_argument("--start", type=int, default=1)
    r.add_argument("--storm", default=None)
    r.add_argument("--scratch", default=None, help="parent dir of the data dirs (default: $TMPDIR)")
    s = sp.add_parser("summarize")
    s.add_argument("out")
    a = ap.parse_args()
    run(a) if a.cmd == "run" else summarize(a)


if __name__ == "__main__":
    main()
