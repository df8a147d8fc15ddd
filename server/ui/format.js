// Formatting shared by every view. Durations match the console's
// (`42s`, `5m03s`, `3h05m`, `2d03h`); times are the viewer's local time,
// with the UTC instant for a `title`.

/** A compact signed duration, whole seconds towards zero. */
export function fmtDuration(ms) {
  const sign = ms < 0 ? '-' : '';
  const s = Math.trunc(Math.abs(ms) / 1000);
  const two = (n) => String(n).padStart(2, '0');
  let body;
  if (s < 60) body = `${s}s`;
  else if (s < 3600) body = `${Math.floor(s / 60)}m${two(s % 60)}s`;
  else if (s < 86400) body = `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m`;
  else body = `${Math.floor(s / 86400)}d${two(Math.floor((s % 86400) / 3600))}h`;
  return sign + body;
}

const DAY_MS = 86400000;

/**
 * Time left to an entitlement's end, in whole days (`12d`, truncated:
 * never more than is left); under a day as `fmtDuration` (`5h03m`).
 */
export function fmtDaysLeft(ms) {
  if (ms >= DAY_MS) return `${Math.floor(ms / DAY_MS)}d`;
  return fmtDuration(Math.max(0, ms));
}

/** Seconds of a policy (`ttl_s` etc.) in the same style, without rounding noise. */
export function fmtSeconds(s) {
  if (s < 1) return `${Math.round(s * 1000)}ms`;
  return fmtDuration(s * 1000);
}

const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const dateTimeFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
});

/** Wall-clock time in the viewer's zone (`14:03:07`). */
export function fmtTime(ms) {
  return timeFmt.format(new Date(ms));
}

/** Date and time in the viewer's zone. */
export function fmtDateTime(ms) {
  return dateTimeFmt.format(new Date(ms));
}

/** The same instant in UTC, for hovering (`2026-11-30 05:00:00.000 UTC`). */
export function utcTitle(ms) {
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
}

/**
 * Where a range's history starts, in ms: `coveredFrom` (the server's
 * `covered_from`) when it is later than `from` (a young server, or a pool
 * added inside the range), else `from`. A server older than the field
 * sends none: the whole range.
 */
export function coveredStart(from, coveredFrom) {
  const f = Date.parse(from);
  const c = Date.parse(coveredFrom ?? '');
  return Number.isNaN(c) ? f : Math.max(f, c);
}

/** The first 8 characters of a seat id, as the console shows it. */
export function shortId(id) {
  return id.length > 8 ? id.slice(0, 8) : id;
}

/** `1234567` → `1,234,567` in the viewer's locale. */
export function fmtCount(n) {
  return n.toLocaleString();
}

/**
 * A duration typed by a person (`90s`, `10m`, `1h30m`, `2d`, or bare
 * seconds) → whole seconds. Empty → null (no block). Throws on nonsense.
 */
export function parseDuration(text) {
  const t = text.trim().toLowerCase();
  if (t === '') return null;
  if (/^\d+$/.test(t)) return Number(t);
  const units = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
  const re = /(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)/gy;
  let total = 0;
  let used = 0;
  let m;
  while ((m = re.exec(t)) !== null) {
    total += m[2] === 'ms' ? Number(m[1]) / 1000 : Number(m[1]) * units[m[2]];
    used = re.lastIndex;
    while (t[used] === ' ') used += 1;
    re.lastIndex = used;
  }
  if (used !== t.length || used === 0) {
    throw new Error(`"${text.trim()}" is not a duration: write e.g. 10m, 1h or 2d (empty: no block)`);
  }
  return Math.round(total);
}

/**
 * The server's clock as seen from here: every response's `now` sets the
 * offset, so countdowns run on the server's time even when this machine's
 * clock is off. `now()` is the estimated server time in ms.
 */
export const clock = {
  offset: 0,
  sync(nowIso) {
    const t = Date.parse(nowIso);
    if (!Number.isNaN(t)) this.offset = t - Date.now();
  },
  now() {
    return Date.now() + this.offset;
  },
};
