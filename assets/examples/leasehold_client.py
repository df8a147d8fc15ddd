#!/usr/bin/env python3
"""A Leasehold client in plain HTTP: check out a seat, verify its token
against the server's JWKS, heartbeat at a third of the lease's window, and
release the seat on exit.

    pip install -r assets/examples/requirements.txt
    python3 assets/examples/leasehold_client.py --server http://127.0.0.1:7400 \
        --license demo-cad --key demo-cad-key --holder alice --seconds 30

Every heartbeat reports how long the user has been idle ({"idle_s": N},
whole seconds since the last activity, on the local monotonic clock). A
real application calls User.touch() from its input handlers; here the user
is active all along unless --idle-after says when they walk away (and
--back-after when they come back); Enter on a terminal counts as activity
too. On a license with an idle_timeout the server reclaims the seat of a
user away that long (410 seat_lost, reason idle): the example then takes no
seat until the next activity, and checks out again (waiting if the pool is
full). Any other 410 (revoked, lapsed, released) checks out again at once.

Prints one line per step. Exits 0 after releasing the seat (at the end of
--seconds, or on Ctrl-C / SIGTERM), 1 on an error the server will not change
its mind about (wrong key, unknown license, blocked, not allowed by the
license's allow/deny lists) or when no seat came within --seconds, 2 on a bad
token. A full pool (409 no_seats_available) and a holder or group at its cap
(409 limit_reached) are waited out, as long as Retry-After says.

Borrowing (a seat for offline use, on a license with [license.borrow]):

    python3 assets/examples/leasehold_client.py --license demo-ide \
        --key demo-ide-key --holder alice --fingerprint alice-laptop --borrow 3d

borrows once (no heartbeats), verifies the token offline with PyJWT against
the JWKS (its exp, checked on the local clock, is the borrow's end, and it
claims "borrowed": true) and exits, leaving the seat out. With --seconds it
holds the borrow that long, sending nothing, then returns it early (so do
Ctrl-C and SIGTERM). --return SEAT_ID returns a borrow early. A borrow
refused (400 too long, 403 not lent, 409 all borrowable seats out) exits 1.
"""

import argparse
import signal
import sys
import threading
import time
import uuid
from datetime import datetime, timezone

import jwt  # PyJWT, with cryptography for EdDSA
import requests

TIMEOUT = 5  # seconds per request


def parse_time(s):
    """RFC 3339 with milliseconds, e.g. 2026-11-30T04:00:00.123Z."""
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


class Refused(Exception):
    """The server said no in a way retrying will not change."""


class SeatLost(Exception):
    """410 seat_lost: the server no longer holds the seat. reason: idle,
    revoked, lapsed, released (None from an older server)."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason
        self.message = message


class User:
    """The idle clock: when the user last did something, on the monotonic
    clock (so a change of the wall clock does not count as idleness). An
    application calls touch() on every input; this example's simulated user
    is active until idle_after seconds from the start, then away until
    back_after seconds later (never back if None); tick() brings the clock
    up to date with that plan."""

    def __init__(self, idle_after=None, back_after=None):
        self.start = time.monotonic()
        self.last = self.start
        self.idle_after = idle_after
        self.back_after = back_after
        self.lock = threading.Lock()

    def touch(self, at=None):
        with self.lock:
            self.last = max(self.last, time.monotonic() if at is None else at)

    def tick(self):
        now = time.monotonic()
        if self.idle_after is None:
            self.touch(now)
            return
        away_from = self.start + self.idle_after
        back = self.back_after is not None and now >= away_from + self.back_after
        self.touch(now if back else min(now, away_from))

    def latest(self):
        self.tick()
        with self.lock:
            return self.last

    def idle_s(self):
        """Whole seconds since the last activity, as a heartbeat reports it."""
        return int(time.monotonic() - self.latest())

    def wait_for_activity(self, after, deadline):
        """True once there is an activity later than `after` (at once if
        after is None), False if the deadline comes first."""
        while after is not None and self.latest() <= after:
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        return True

    def watch_terminal(self):
        """On a terminal, each Enter is an activity."""
        if not sys.stdin.isatty():
            return

        def read():
            for _ in sys.stdin:
                self.touch()

        threading.Thread(target=read, daemon=True).start()


class Client:
    def __init__(self, server, license_id, key, holder, fingerprint):
        self.base = server.rstrip("/")
        self.license = license_id
        self.holder = holder
        self.fingerprint = fingerprint
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"
        self.keys = {}

    def seats_url(self, *parts):
        return "/".join([f"{self.base}/v1/licenses/{self.license}/seats", *parts])

    def fetch_jwks(self):
        resp = requests.get(f"{self.base}/.well-known/jwks.json", timeout=TIMEOUT)
        resp.raise_for_status()
        self.keys = {k["kid"]: jwt.PyJWK(k, algorithm="EdDSA") for k in resp.json()["keys"]}
        print(f"jwks: {len(self.keys)} key(s)", flush=True)

    def verify(self, lease, offline=False):
        """Check the token's signature and that it says what the body says.
        offline: also check exp on the local clock, as a program that cannot
        ask the server does with a borrowed seat's token."""
        kid = jwt.get_unverified_header(lease["token"]).get("kid")
        if kid not in self.keys:
            self.fetch_jwks()  # the server may have a new key
        claims = jwt.decode(
            lease["token"],
            self.keys[kid].key,
            algorithms=["EdDSA"],
            issuer="leasehold",
            # Online, expiry is the server's business: a token it just issued
            # is current, and checking exp/iat against a local clock that may
            # be hours off would refuse good tokens. Schedule by the window.
            options={"verify_exp": offline, "verify_iat": False, "require": ["exp", "iat"]},
        )
        if claims.get("borrowed", False) != lease.get("borrowed", False):
            raise jwt.InvalidTokenError(f"token borrowed={claims.get('borrowed')!r}, body says {lease.get('borrowed')!r}")
        expected = {
            "sub": lease["holder"],
            "lic": lease["license_id"],
            "sid": lease["seat_id"],
            "iat": int(parse_time(lease["issued_at"]).timestamp()),
            "exp": int(parse_time(lease["expires_at"]).timestamp()),
        }
        for name, value in expected.items():
            if claims.get(name) != value:
                raise jwt.InvalidTokenError(f"token {name}={claims.get(name)!r}, body says {value!r}")
        if lease["holder"] != self.holder or lease["license_id"] != self.license:
            raise jwt.InvalidTokenError("lease is for another holder or license")
        print(f"verified: token signed by {kid} matches seat {lease['seat_id']}", flush=True)

    def checkout(self, deadline):
        """Take a seat, waiting while the pool is full. One Idempotency-Key per
        attempt, re-sent if the attempt is retried after a network error."""
        key = str(uuid.uuid4())
        while True:
            try:
                resp = self.http.post(
                    self.seats_url(),
                    json={"holder": self.holder, "fingerprint": self.fingerprint},
                    headers={"Idempotency-Key": key},
                    timeout=TIMEOUT,
                )
            except requests.RequestException as e:
                print(f"checkout: failed ({type(e).__name__}), retrying", flush=True)
                time.sleep(1)
                continue
            if resp.status_code == 201:
                return resp.json()
            error = resp.json()
            if resp.status_code == 409:
                wait = int(resp.headers.get("Retry-After", "5"))
                print(f"checkout: {describe_409(error)}, retry in {wait} s", flush=True)
                if time.monotonic() + wait > deadline:
                    raise Refused("no seat became free in time")
                time.sleep(wait)
                key = str(uuid.uuid4())  # a new attempt
                continue
            if resp.status_code >= 500:
                time.sleep(1)
                continue
            raise Refused(f"{resp.status_code} {error['error']}: {error['message']}")

    def heartbeat(self, seat_id, idle_s):
        """The renewed lease, reporting idle_s. Raises SeatLost if the seat
        is gone (410), requests' errors on a network error or 5xx: the
        caller keeps its lease and retries."""
        resp = self.http.post(self.seats_url(seat_id, "heartbeat"), json={"idle_s": idle_s}, timeout=TIMEOUT)
        if resp.status_code == 410:
            try:
                error = resp.json()
            except ValueError:
                error = {}
            raise SeatLost(error.get("reason"), error.get("message", "seat lost"))
        resp.raise_for_status()
        return resp.json()

    def release(self, seat_id, what="release"):
        resp = self.http.delete(self.seats_url(seat_id), timeout=TIMEOUT)
        print(f"{what}: seat {seat_id} ({resp.status_code})", flush=True)
        if resp.status_code != 204:
            error = resp.json()
            raise Refused(f"{resp.status_code} {error['error']}: {error['message']}")

    def borrow(self, seconds):
        """One borrow request: the seat, or Refused (no waiting: a borrow is
        asked for once, before going offline)."""
        resp = self.http.post(
            self.seats_url(),
            json={"holder": self.holder, "fingerprint": self.fingerprint, "borrow_s": seconds},
            timeout=TIMEOUT,
        )
        if resp.status_code == 201:
            return resp.json()
        error = resp.json()
        detail = f" ({describe_409(error)})" if resp.status_code == 409 else ""
        raise Refused(f"{resp.status_code} {error['error']}: {error['message']}{detail}")


def describe_409(error):
    """Why a checkout was refused for now: a full pool, or a cap."""
    if error.get("error") == "limit_reached":
        if error.get("limit") == "group":
            return f"limit reached (group {error.get('group')} holds its max of {error.get('max')})"
        return f"limit reached ({error.get('limit')} max {error.get('max')})"
    why = f"no seats ({error.get('live')}/{error.get('seats')} live"
    if error.get("reserved"):
        why += f", {error['reserved']} reserved for other groups"
    return why + ")"


def window_s(lease):
    return (parse_time(lease["expires_at"]) - parse_time(lease["issued_at"])).total_seconds()


def acquire(client, deadline):
    sent = time.monotonic()
    lease = client.checkout(deadline)
    overage = " [overage seat]" if lease.get("overage") else ""
    print(f"checkout: seat {lease['seat_id']} expires {lease['expires_at']} (window {window_s(lease):g} s){overage}", flush=True)
    client.verify(lease)
    return lease, sent


def run(client, seconds, user):
    deadline = time.monotonic() + seconds
    client.fetch_jwks()
    lease, sent = acquire(client, deadline)
    # The activity the last renewed heartbeat reported: what the server knows.
    acknowledged = None
    try:
        while True:
            # Heartbeat at a third of the lease's own window, measured from
            # when we asked for it (the local clock's offset does not matter).
            window = window_s(lease)
            next_beat = sent + window / 3
            if next_beat > deadline:
                time.sleep(max(0.0, deadline - time.monotonic()))
                return
            time.sleep(max(0.0, next_beat - time.monotonic()))
            beat_sent = time.monotonic()
            reported = user.latest()
            idle_s = user.idle_s()
            try:
                renewed = client.heartbeat(lease["seat_id"], idle_s)
            except requests.RequestException as e:
                # Transient: the lease stays valid until its signed expiry.
                if time.monotonic() > sent + window:
                    print("heartbeat: lease lapsed, checking out again", flush=True)
                    lease, sent = acquire(client, deadline)
                else:
                    print(f"heartbeat: failed ({type(e).__name__}), keeping the lease", flush=True)
                    time.sleep(min(1.0, window / 10))
                continue
            except SeatLost as lost:
                seat, lease = lease["seat_id"], None
                if lost.reason == "idle":
                    # The user is away: a seat taken now would only be
                    # reclaimed again. Wait for them; an activity the server
                    # never heard of (back just before the reclaim) counts.
                    print(f"heartbeat: seat {seat} reclaimed, idle ({lost.message}); waiting for activity", flush=True)
                    if not user.wait_for_activity(acknowledged, deadline):
                        print("activity: none before the end", flush=True)
                        return
                    print("activity: the user is back, checking out again", flush=True)
                else:
                    print(f"heartbeat: seat {seat} lost ({lost.reason or 'no reason given'}), checking out again", flush=True)
                lease, sent = acquire(client, deadline)
                continue
            print(f"heartbeat: seat {renewed['seat_id']} expires {renewed['expires_at']} (idle_s {idle_s})", flush=True)
            client.verify(renewed)
            lease, sent, acknowledged = renewed, beat_sent, reported
    finally:
        if lease is not None:
            client.release(lease["seat_id"])


def parse_duration(text):
    """Whole seconds of "90", "90s", "30m", "8h" or "3d"."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90m, 8h, 3d)")
    return int(number) * units[unit]


def borrow(client, seconds, hold):
    """Borrow, verify offline, and leave it out; or, with hold, keep it that
    long (no heartbeats: the server would answer 409 borrowed) and return
    it early."""
    client.fetch_jwks()
    lease = client.borrow(seconds)
    print(f"borrowed: seat {lease['seat_id']} until {lease['expires_at']} (borrow_s {seconds})", flush=True)
    if not lease.get("borrowed"):
        raise jwt.InvalidTokenError("asked to borrow, the lease is not borrowed")
    client.verify(lease, offline=True)
    exp = jwt.decode(lease["token"], options={"verify_signature": False})["exp"]
    print(f"offline: token valid until exp {exp} ({datetime.fromtimestamp(exp, tz=timezone.utc).isoformat()})", flush=True)
    if hold is None:
        print(f"left out: return it early with --return {lease['seat_id']}", flush=True)
        return
    try:
        time.sleep(max(0.0, min(hold, window_s(lease))))
    finally:
        client.release(lease["seat_id"], "return")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="http://127.0.0.1:7400")
    p.add_argument("--license", required=True)
    p.add_argument("--key", required=True, help="the license key (Bearer)")
    p.add_argument("--holder", required=True)
    p.add_argument("--fingerprint", default=f"py-{uuid.getnode():x}", help="this machine (default: from its MAC)")
    p.add_argument("--seconds", type=float, default=None, help="hold the seat this long, then release (default: until stopped)")
    p.add_argument("--idle-after", type=float, metavar="SECONDS", help="the simulated user walks away after this long (default: active all along)")
    p.add_argument("--back-after", type=float, metavar="SECONDS", help="and comes back this long after walking away (default: never)")
    p.add_argument("--borrow", type=parse_duration, metavar="DURATION", help="borrow a seat for offline use this long (e.g. 3d), verify it and exit")
    p.add_argument("--return", dest="give_back", metavar="SEAT_ID", help="return a borrowed seat early and exit")
    args = p.parse_args()

    # SIGTERM releases the seat like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    client = Client(args.server, args.license, args.key, args.holder, args.fingerprint)
    try:
        if args.give_back:
            client.release(args.give_back, "return")
        elif args.borrow is not None:
            borrow(client, args.borrow, args.seconds)
        else:
            user = User(args.idle_after, args.back_after)
            user.watch_terminal()
            run(client, float("inf") if args.seconds is None else args.seconds, user)
    except KeyboardInterrupt:
        pass
    except Refused as e:
        print(f"error: {e}", flush=True)
        return 1
    except jwt.InvalidTokenError as e:
        print(f"error: bad lease token: {e}", flush=True)
        return 2
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
