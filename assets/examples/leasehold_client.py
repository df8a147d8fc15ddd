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
token, 3 on a lease that is not entitled (--vendor-key, below). A full pool (409 no_seats_available) and a holder or group at its cap
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

Entitlements (a vendor's application pinning its key):

    python3 assets/examples/leasehold_client.py --license cad --key cad-key \
        --holder alice --vendor-key 11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo \
        --version 2026.2 --seconds 30

sends the version with the checkout and checks, offline, that the lease
comes from an entitled server: after the checkout (or borrow) it fetches
GET /v1/licenses/{id}/entitlements and needs one entitlement that verifies
with a --vendor-key (repeat it for a vendor rotating its key), has typ
leasehold-entitlement, names the license, is in force on this machine's
clock (nbf <= now < exp + grace, not replaced by a newer one of the list),
is bound to no server or to the kid of the lease token's header (the
thumbprint of the JWKS key that signed it), covers --version, and ends no
earlier than the lease. It checks again at a heartbeat once that
entitlement has ended on this clock, or when a renewal runs past its end.
A lease that is not entitled is released (a borrow returned) and the
example exits 3, saying which link failed.
"""

import argparse
import base64
import hashlib
import json
import signal
import sys
import threading
import time
import uuid
from datetime import datetime, timezone

import jwt  # PyJWT, with cryptography for EdDSA
import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TIMEOUT = 5  # seconds per request


def parse_time(s):
    """RFC 3339 with milliseconds, e.g. 2026-11-30T04:00:00.123Z."""
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


class Refused(Exception):
    """The server said no in a way retrying will not change."""


class NotEntitled(Exception):
    """The lease is not entitled for this application: the message says
    which link of the chain (vendor key, entitlement, server key, lease)
    failed."""


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


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def vendor_key(text):
    """A --vendor-key: base64url (no padding) of the 32 raw bytes."""
    text = text.strip()
    try:
        if not text or not set(text) <= set(B64URL):
            raise ValueError
        raw = b64url_decode(text)
        if len(raw) != 32:
            raise ValueError
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a vendor key (base64url of 32 bytes)")


def thumbprint(jwk):
    """The RFC 7638 thumbprint of an Ed25519 JWK, computed from the key:
    what the kid of a token it signed must be."""
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        return None
    canonical = {"crv": "Ed25519", "kty": "OKP", "x": b64url(b64url_decode(jwk["x"]))}
    text = json.dumps(canonical, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(text.encode()).digest())


def parse_version(text):
    """Dotted numbers, "2026.2" -> [2026, 2]; None for anything else."""
    parts = text.split(".") if isinstance(text, str) else []
    if not parts or len(parts) > 8 or not all(p.isascii() and p.isdigit() and len(p) <= 19 for p in parts):
        return None
    return [int(p) for p in parts]


def compare_versions(a, b):
    """-1, 0 or 1; missing parts are 0 (2026 == 2026.0)."""
    n = max(len(a), len(b))
    a, b = a + [0] * (n - len(a)), b + [0] * (n - len(b))
    return (a > b) - (a < b)


def version_in_range(version, range_text):
    """Whether version is in ">=2025.1, <2027": every comparator holds."""
    v = parse_version(version)
    if v is None:
        return False
    holds = {">=": lambda o: o >= 0, "<=": lambda o: o <= 0, ">": lambda o: o > 0, "<": lambda o: o < 0, "=": lambda o: o == 0}
    for comparator in range_text.split(","):
        comparator = comparator.strip()
        op = next((op for op in holds if comparator.startswith(op)), None)
        bound = parse_version(comparator[len(op):].strip()) if op else None
        if bound is None or not holds[op](compare_versions(v, bound)):
            return False
    return True


def verify_entitlement(jws, vendor_keys):
    """The claims of an entitlement JWS that verifies with one of the
    vendor's keys, else None."""
    try:
        header = jwt.get_unverified_header(jws)
    except jwt.InvalidTokenError:
        return None
    if header.get("alg") != "EdDSA" or header.get("typ") != "leasehold-entitlement" or "crit" in header:
        return None
    skip = ("exp", "nbf", "iat", "aud", "iss", "sub", "jti")  # judged below, on this clock
    for key in vendor_keys:
        try:
            return jwt.decode(jws, key, algorithms=["EdDSA"], options={f"verify_{c}": False for c in skip})
        except jwt.InvalidTokenError:
            continue
    return None


def grant_for(claims, license_id):
    items = claims.get("licenses")
    return next((g for g in items if isinstance(g, dict) and g.get("id") == license_id), None) if isinstance(items, list) else None


def ends_at(claims):
    """exp + grace (seconds), or None for a perpetual entitlement."""
    return None if claims.get("exp") is None else claims["exp"] + (claims.get("grace") or 0)


def in_force(claims, verified, now):
    if claims.get("nbf") is not None and now < claims["nbf"]:
        return False
    if ends_at(claims) is not None and now >= ends_at(claims):
        return False
    # Replaced by a newer one of the same id, from that one's nbf on.
    return not any(
        o.get("iss") == claims.get("iss") and o.get("jti") == claims.get("jti") and o.get("iat", 0) > claims.get("iat", 0) and (o.get("nbf") is None or o["nbf"] <= now)
        for o in verified
    )


def link(claims, lease, kid, version):
    """Why this entitlement in force does not entitle the lease, or None."""
    aud = claims.get("aud")
    bound = [aud] if isinstance(aud, str) else (aud or [])
    if bound and kid not in bound:
        return f"the entitlement is bound to another server (not kid {kid})"
    versions = grant_for(claims, lease["lic"]).get("versions")
    if versions is not None and not version_in_range(version, versions):
        return f"version {version or '(none)'} is not entitled (entitled: {versions})"
    if ends_at(claims) is not None and lease["exp"] > ends_at(claims):
        return "the lease runs past the entitlement's term"
    return None


def check_chain(token, jwks, entitlements, vendor_keys, version, now):
    """The entitlement (claims) the lease token is entitled by, at this
    machine's time now (seconds), or NotEntitled saying which link fails:
    vendor key -> entitlement -> the server's key (kid) -> the lease."""
    kid = jwt.get_unverified_header(token).get("kid")
    key = next((k for k in jwks if kid is not None and thumbprint(k) == kid), None)
    if key is None:
        raise NotEntitled("the lease token does not verify with the server's key named by its kid: no key of the JWKS has that thumbprint")
    try:
        lease = jwt.decode(token, jwt.PyJWK(key, algorithm="EdDSA").key, algorithms=["EdDSA"], issuer="leasehold", options={"verify_exp": False, "verify_iat": False})
    except jwt.InvalidTokenError as e:
        raise NotEntitled(f"the lease token does not verify with the server's key named by its kid: {e}")
    verified = [c for c in (verify_entitlement(jws, vendor_keys) for jws in entitlements) if c is not None]
    if not verified:
        raise NotEntitled("no entitlement verifies with the vendor's key")
    naming = [c for c in verified if grant_for(c, lease["lic"]) is not None]
    if not naming:
        raise NotEntitled(f"no entitlement in force names license {lease['lic']}")
    failure = "the entitlements for this license are not in force now (not yet, ended or replaced)"
    for claims in (c for c in naming if in_force(c, verified, now)):
        why = link(claims, lease, kid, version)
        if why is None:
            return claims
        failure = why
    raise NotEntitled(failure)


class Client:
    def __init__(self, server, license_id, key, holder, fingerprint, vendor_keys=(), version=None):
        self.base = server.rstrip("/")
        self.license = license_id
        self.holder = holder
        self.fingerprint = fingerprint
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"
        self.keys = {}
        self.jwks = []
        self.vendor_keys = list(vendor_keys)
        self.version = version
        # exp + grace of the entitlement the lease held was found entitled
        # by (seconds on this machine's clock); None: perpetual, or none.
        self.entitled_until = None

    def seats_url(self, *parts):
        return "/".join([f"{self.base}/v1/licenses/{self.license}/seats", *parts])

    def fetch_jwks(self):
        resp = requests.get(f"{self.base}/.well-known/jwks.json", timeout=TIMEOUT)
        resp.raise_for_status()
        self.jwks = resp.json()["keys"]
        self.keys = {k["kid"]: jwt.PyJWK(k, algorithm="EdDSA") for k in self.jwks}
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

    def check_entitled(self, lease):
        """With --vendor-key: the chain from the vendor's key to this lease,
        on this machine's clock, or NotEntitled. Network errors fetching the
        entitlements propagate (requests' exceptions)."""
        if not self.vendor_keys:
            return
        resp = self.http.get(f"{self.base}/v1/licenses/{self.license}/entitlements", timeout=TIMEOUT)
        if resp.status_code != 200:
            error = resp.json()
            raise Refused(f"entitlements: {resp.status_code} {error['error']}: {error['message']}")
        claims = check_chain(lease["token"], self.jwks, resp.json()["entitlements"], self.vendor_keys, self.version, time.time())
        self.entitled_until = ends_at(claims)
        until = "no end" if self.entitled_until is None else datetime.fromtimestamp(self.entitled_until, tz=timezone.utc).isoformat()
        print(f"entitled: seat {lease['seat_id']} by {claims['iss']}'s entitlement {claims['jti']} (until {until})", flush=True)

    def recheck_due(self, lease):
        """The entitlement relied on has ended on this clock, or the lease
        (its token's whole seconds) now runs past it."""
        if not self.vendor_keys or self.entitled_until is None:
            return False
        exp = int(parse_time(lease["expires_at"]).timestamp())
        return time.time() >= self.entitled_until or exp > self.entitled_until

    def checkout(self, deadline):
        """Take a seat, waiting while the pool is full. One Idempotency-Key per
        attempt, re-sent if the attempt is retried after a network error."""
        key = str(uuid.uuid4())
        while True:
            try:
                resp = self.http.post(
                    self.seats_url(),
                    json=self.body(holder=self.holder, fingerprint=self.fingerprint),
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

    def body(self, **fields):
        """A checkout's body: the fields, and the version if one is set."""
        return {**fields, "version": self.version} if self.version else fields

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
            json=self.body(holder=self.holder, fingerprint=self.fingerprint, borrow_s=seconds),
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
    """A seat, its token verified and (with --vendor-key) its lease
    entitled; a seat that is not is released before NotEntitled is raised,
    and one whose entitlements could not be fetched is released and
    checked out again."""
    while True:
        sent = time.monotonic()
        lease = client.checkout(deadline)
        overage = " [overage seat]" if lease.get("overage") else ""
        print(f"checkout: seat {lease['seat_id']} expires {lease['expires_at']} (window {window_s(lease):g} s){overage}", flush=True)
        client.verify(lease)
        try:
            client.check_entitled(lease)
            return lease, sent
        except requests.RequestException as e:
            print(f"entitlements: failed ({type(e).__name__}), checking out again", flush=True)
            release_quietly(client, lease)
            if time.monotonic() + 1 > deadline:
                raise Refused("the entitlements could not be fetched in time")
            time.sleep(1)
        except (NotEntitled, Refused):
            client.release(lease["seat_id"])
            raise


def release_quietly(client, lease):
    try:
        client.release(lease["seat_id"])
    except (requests.RequestException, Refused) as e:
        print(f"release: failed ({e}); the seat lapses at its expiry", flush=True)


def recheck(client, lease):
    """At a heartbeat: the chain again if due. Not entitled, or the
    entitlements cannot be fetched: NotEntitled (the caller releases)."""
    if not client.recheck_due(lease):
        return
    try:
        client.check_entitled(lease)
    except requests.RequestException as e:
        raise NotEntitled(f"the entitlements could not be fetched to check the lease again ({type(e).__name__})")


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
            recheck(client, lease)
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
    try:
        client.check_entitled(lease)
    except (NotEntitled, Refused, requests.RequestException):
        client.release(lease["seat_id"], "return")
        raise
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
    p.add_argument("--vendor-key", dest="vendor_keys", type=vendor_key, action="append", default=[], metavar="KEY", help="pin the vendor's public key (base64url): a lease that is not entitled is released, exit 3 (repeatable)")
    p.add_argument("--version", help="this application's version, sent with the checkout and checked against the entitlement (e.g. 2026.2)")
    args = p.parse_args()

    # SIGTERM releases the seat like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    client = Client(args.server, args.license, args.key, args.holder, args.fingerprint, args.vendor_keys, args.version)
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
    except NotEntitled as e:
        print(f"error: not entitled: {e}", flush=True)
        return 3
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
