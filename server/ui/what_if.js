// Right-sizing on a pool's history page: the what-if curve (the recorded
// demand of the page's range replayed against each seat count by
// `GET /v1/admin/usage/what-if`: denial rate against seats, the seats of now
// and the recommendation marked) and the denials split by what they say
// about the seat count. Inline SVG built with DOM calls; colours from
// classes in app.css (the CSP forbids inline style).

import { getJson, withQuery, HttpError } from './api.js';
import { $, svg, setText } from './dom.js';
import { coveredStart, fmtCount, fmtDateTime, fmtDuration, utcTitle } from './format.js';

/** The server's target when the page sends none, in percent. */
const TARGET = 1;
/** The server's tolerance for a true denial when the page sends none. */
const TOLERANCE = '60 s';

/** The shortest interval between two live refreshes of one pool's replay. */
const REPLAY_EVERY_MS = 60e3;
let lastShown = { key: '', at: 0 };

const W = 720;
const H = 200;
const PAD = { left: 44, right: 12, top: 30, bottom: 24 };

/** A denial rate as the CLI says it: `0.8 %`; a small share never reads as 0. */
export function rateText(rate) {
  if (rate <= 0) return '0 %';
  if (rate < 0.005) return '<0.01 %';
  if (rate < 0.1) return `${rate.toFixed(2)} %`;
  if (rate >= 100) return '100 %';
  return `${rate.toFixed(1)} %`;
}

const counted = (n, what) => `${fmtCount(n)} ${what}${n === 1 ? '' : 's'}`;

/** The recommendation in one sentence, as `leasehold report --what-if` says it. */
export function recommendationText(w, target = TARGET) {
  const have = `you have ${fmtCount(w.seats_now)}`;
  if (w.requests === 0) return `Nothing to replay: no session or true denial in the range; ${have}.`;
  const requests = counted(w.requests, 'request');
  const r = w.recommended;
  if (r) {
    const denied = r.denial_rate > 0 ? rateText(r.denial_rate) : 'none';
    return `${counted(r.seats, 'seat')} would have denied ${denied} of ${requests}; ${have}.`;
  }
  if (!w.curve.length) return `No seat count was replayed; ${have}.`;
  const first = w.curve[0].seats;
  const last = w.curve[w.curve.length - 1].seats;
  return `No seat count from ${first} to ${last} would have denied at most ${target} % of ${requests}; ${have}.`;
}

/**
 * The summary's refusals split as the report reads them: `shortage` (true
 * denials, plus refusals of no recorded reason from an older server),
 * `served` (refused while full, served within the tolerance) and `caps`
 * (caps, lists, blocks).
 */
export function refusals(s) {
  const by = s.denials_by_reason || {};
  const n = (k) => by[k] || 0;
  const recorded = ['full', 'holder', 'group', 'borrow', 'not_allowed', 'blocked'].reduce((a, k) => a + n(k), 0);
  const trueFull = Math.min(s.true_denials || 0, n('full'));
  return {
    shortage: trueFull + Math.max(0, s.denials - recorded),
    served: n('full') - trueFull,
    caps: n('holder') + n('group') + n('borrow') + n('not_allowed') + n('blocked'),
  };
}

/** `[label, value, title, data-figure]` of the denials' breakdown. */
export function refusalItems(s) {
  const r = refusals(s);
  const other = [];
  if (r.served) other.push(`${fmtCount(r.served)} served within ${TOLERANCE}`);
  if (r.caps) other.push(`${fmtCount(r.caps)} by caps or lists`);
  return [
    // "13 from 4 holders": retries of one person are not more people.
    ['True denials', fmtCount(r.shortage) + (s.denied_holders ? ` from ${counted(s.denied_holders, 'holder')}` : ''),
      `Refused while every seat was in use and not served within ${TOLERANCE}: the refusals that mean too few seats`,
      'true-denials'],
    ['Not a shortage', other.length ? other.join(' · ') : '0',
      `Refused while full but served within ${TOLERANCE}, or refused by a cap (per holder, group, borrowing), the allow/deny lists or a block`,
      'not-shortage'],
  ];
}

/**
 * Where the replay starts, in ms: the server replays only `[covered_from,
 * to)`, so a young server's curve is about its few minutes, not the page's
 * whole range. `from` when the history covers all of it.
 */
const replayStart = (w) => coveredStart(w.from, w.covered_from);

/** The caption under the recommendation when the replay is clipped, else ''. */
function replayedText(w) {
  const start = replayStart(w);
  if (start <= Date.parse(w.from)) return '';
  return `Replayed from ${fmtDateTime(start)}, where the history starts: ${fmtDuration(Date.parse(w.to) - start)}, not the whole range.`;
}

/** A round top for the rate axis: 1, 2, 5, 10, 20, 50, 100 %. */
function niceTop(max) {
  for (const t of [1, 2, 5, 10, 20, 50]) if (max <= t) return t;
  return 100;
}

/** Draw the curve of `w` (a WhatIfResponse) into `host`, replacing what was there. */
export function drawWhatIf(host, w, target = TARGET) {
  const pts = w.curve;
  const lo = pts.length ? pts[0].seats : 0;
  const hi = pts.length ? pts[pts.length - 1].seats : 0;
  const top = niceTop(Math.max(target, ...pts.map((p) => p.denial_rate)));
  const x = (k) => (hi === lo ? (PAD.left + W - PAD.right) / 2 : PAD.left + ((k - lo) / (hi - lo)) * (W - PAD.left - PAD.right));
  const y = (rate) => H - PAD.bottom - (rate / top) * (H - PAD.top - PAD.bottom);
  const rec = w.recommended ? w.recommended.seats : null;

  const root = svg('svg', {
    class: 'what-if',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'data-seats-now': w.seats_now,
    'data-recommended': rec ?? '',
    'data-replay-from': replayStart(w),
    'aria-label': `Denial rate per seat count for ${w.license_id}: ${recommendationText(w, target)}`,
  });
  for (const v of [0, top / 2, top]) {
    root.append(
      svg('line', { class: 'grid-line', x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      svg('text', { class: 'axis', x: PAD.left - 4, y: y(v) + 4, 'text-anchor': 'end' }, `${v} %`),
    );
  }
  root.append(
    svg('line', { class: 'target-line', x1: PAD.left, x2: W - PAD.right, y1: y(target), y2: y(target) },
      svg('title', {}, `target: at most ${target} % denied`)),
    svg('text', { class: 'axis', x: PAD.left - 4, y: H - 6, 'text-anchor': 'end' }, 'seats'),
  );
  // Every seat count on the axis while they fit; else the two ends.
  const ticks = pts.length <= 25 ? pts.map((p) => p.seats) : [lo, hi];
  for (const k of new Set(ticks)) {
    root.append(svg('text', { class: 'axis', x: x(k), y: H - 6, 'text-anchor': 'middle' }, String(k)));
  }
  const marks = [];
  if (w.seats_now >= lo && w.seats_now <= hi) marks.push([w.seats_now, 'now-line', `now: ${w.seats_now}`, PAD.top - 16]);
  if (rec !== null) marks.push([rec, 'rec-line', `recommended: ${rec}`, PAD.top - 4]);
  for (const [k, cls, label, ty] of marks) {
    const anchor = x(k) > W / 2 ? 'end' : 'start';
    root.append(
      svg('line', { class: cls, x1: x(k), x2: x(k), y1: PAD.top - 2, y2: H - PAD.bottom }),
      svg('text', { class: `mark ${cls}`, x: x(k) + (anchor === 'end' ? -4 : 4), y: ty, 'text-anchor': anchor }, label),
    );
  }
  if (pts.length) {
    root.append(svg('path', { class: 'curve', d: pts.map((p, i) => `${i ? 'L' : 'M'}${x(p.seats)},${y(p.denial_rate)}`).join(' ') }));
  }
  const r = pts.length > 60 ? 1.5 : 3.5;
  for (const p of pts) {
    const cls = ['point', p.seats === rec ? 'recommended' : null, p.seats === w.seats_now ? 'now' : null].filter(Boolean);
    root.append(svg('circle', {
      class: cls.join(' '), cx: x(p.seats), cy: y(p.denial_rate), r,
      'data-seats': p.seats, 'data-denials': p.denials, 'data-denial-rate': p.denial_rate,
    }, svg('title', {}, `${counted(p.seats, 'seat')}: ${fmtCount(p.denials)} denied (${rateText(p.denial_rate)}), ` +
      `peak ${fmtCount(p.peak)}, all in use ${fmtDuration(p.full_s * 1000)}, utilization ${(p.utilization * 100).toFixed(1)} %`)));
  }
  host.replaceChildren(root);
}

/**
 * Fetch and show `pool`'s what-if over `[from, to)`. `current()` says the
 * page still shows that pool. A server without the endpoint (404) hides
 * the figure; any other failure says so in it, the rest of the page intact.
 */
export async function showWhatIf(pool, from, to, { background = false, current = () => true } = {}) {
  const box = $('#what-if');
  // A replay of a long, busy range costs the server more than a usage
  // summary: live refreshes of the same pool repeat it at most once a minute.
  const key = `${pool}\n${Date.parse(to) - Date.parse(from)}`;
  if (background && lastShown.key === key && Date.now() - lastShown.at < REPLAY_EVERY_MS) return;
  lastShown = { key, at: Date.now() };
  try {
    const w = await getJson(withQuery('/v1/admin/usage/what-if', { license: pool, from, to }), { background });
    if (!current()) return;
    drawWhatIf($('#what-if-chart'), w);
    setText($('#what-if-text'), recommendationText(w));
    showReplayed(replayedText(w), replayStart(w));
    box.hidden = false;
  } catch (e) {
    if (!current()) return;
    if (e instanceof HttpError && (e.status === 404 || e.status === 405 || e.status === 501)) {
      box.hidden = true;
      return;
    }
    $('#what-if-chart').replaceChildren();
    setText($('#what-if-text'), `No what-if: ${e.message}`);
    showReplayed('', null);
    box.hidden = false;
  }
}

/** The clipped-replay caption: `text`, or hidden when ''. */
function showReplayed(text, start) {
  const p = $('#what-if-covered');
  p.hidden = !text;
  setText(p, text);
  if (text) p.title = utcTitle(start);
}
