// The pools table: one `<tr data-license>` per license, updated in place.
// A full pool stands out (class, glyph and word, not colour alone) and says
// when its next seat frees: the earliest live lease's expiry + skew, if
// nobody renews it, on the server's clock. Seat policies: unused
// reservations, lingering and borrowed seats (— when the pool has no such
// policy), one line per group (`design 2/6 · 1 in use`: reserve/max and the
// seats it holds), and `⇡ OVER +n` when more are live than the pool has
// seats (granted from its overage). Every count has its digits grouped in
// the viewer's locale (`1,000,000`), as the console's exact figures are.
// A pool whose alerts fire (`alerts_firing`, from the licenses file's
// `[[license.alert]]`) shows one `▲ ALERT name` badge per alert beside its
// status, `data-alert="name"` on each.

import { el, setText, setAttr, svg } from './dom.js';
import { clock, fmtCount, fmtDuration, fmtSeconds, utcTitle, fmtTime } from './format.js';

const GAUGE_W = 120;
const GAUGE_H = 12;

/** Rows by license id, reused across refreshes. */
const rows = new Map();
/** license id → ms when its next seat frees (full pools only). */
const freesAt = new Map();

/** The pool's status: glyph + word, and a class for the colour. */
function status(l) {
  if (l.live > l.seats) return { text: `⇡ OVER +${fmtCount(l.live - l.seats)}`, cls: 'over' };
  if (l.live >= l.seats) return { text: '■ FULL', cls: 'full' };
  if (l.live * 5 >= l.seats * 4) return { text: '▲ busy', cls: 'busy' };
  return { text: '● ok', cls: 'ok' };
}

/** A policy count, or — (with why) when the pool has no such policy. */
function policyCount(cell, has, n, what) {
  const shown = has || n > 0;
  setText(cell, shown ? fmtCount(n) : '—');
  setAttr(cell, 'title', shown ? null : `no ${what} on this pool`);
}

/** One `<li data-group>` per group: `name reserve/max · n in use`. */
function renderGroups(ul, groups) {
  const items = groups.map((g) => {
    const max = g.max === null || g.max === undefined ? '∞' : fmtCount(g.max);
    return el(
      'li',
      { 'data-group': g.name, title: `group ${g.name}: reserve ${fmtCount(g.reserve)}, max ${max === '∞' ? 'none' : max}, ${fmtCount(g.live)} in use` },
      el('span', { class: 'group-name' }, g.name),
      ` ${fmtCount(g.reserve)}/${max} · ${fmtCount(g.live)} in use`,
    );
  });
  const key = JSON.stringify(groups);
  if (ul.dataset.key === key) return;
  ul.dataset.key = key;
  ul.replaceChildren(...items);
}

/** One `<span data-alert>` badge per firing alert, replaced only on change. */
function renderAlerts(span, names) {
  const key = JSON.stringify(names);
  if (span.dataset.key === key) return;
  span.dataset.key = key;
  span.replaceChildren(
    ...names.map((n) => el('span', { class: 'alert-badge', 'data-alert': n, title: `alert ${n} is firing` }, `▲ ALERT ${n}`)),
  );
}

function gauge() {
  const fill = svg('rect', { class: 'gauge-fill', x: 0, y: 0, height: GAUGE_H, width: 0, rx: 2 });
  const g = svg(
    'svg',
    { class: 'gauge', width: GAUGE_W, height: GAUGE_H, viewBox: `0 0 ${GAUGE_W} ${GAUGE_H}`, 'aria-hidden': 'true' },
    svg('rect', { class: 'gauge-track', x: 0, y: 0, width: GAUGE_W, height: GAUGE_H, rx: 2 }),
    fill,
  );
  return { g, fill };
}

function makeRow(id, onSelect) {
  const pick = el('button', { type: 'button', class: 'link', 'aria-pressed': 'false' }, id);
  pick.addEventListener('click', () => onSelect(id));
  const { g, fill } = gauge();
  const cells = {
    pick,
    fill,
    count: el('td', { class: 'num count' }),
    free: el('td', { class: 'num' }),
    waiting: el('td', { class: 'num' }),
    reserved: el('td', { class: 'num', 'data-field': 'reserved' }),
    lingering: el('td', { class: 'num', 'data-field': 'lingering' }),
    borrowed: el('td', { class: 'num', 'data-field': 'borrowed' }),
    groups: el('ul', { class: 'groups', 'data-field': 'groups' }),
    ttl: el('td', { class: 'num' }),
    status: el('span', { class: 'status' }),
    frees: el('span', { class: 'frees' }),
    alerts: el('span', { class: 'alerts', 'data-field': 'alerts' }),
  };
  const tr = el(
    'tr',
    { 'data-license': id },
    el('th', { scope: 'row' }, pick),
    el('td', {}, g),
    cells.count,
    cells.free,
    cells.waiting,
    cells.reserved,
    cells.lingering,
    cells.borrowed,
    el('td', {}, cells.groups),
    cells.ttl,
    el('td', {}, cells.status, cells.frees, cells.alerts),
  );
  return { tr, cells, license: null };
}

/**
 * Show `licenses` (the `licenses` of `GET /v1/admin/licenses`), `selected`
 * marked. Rows are matched by id, so an update changes text, not nodes.
 */
export function renderPools(tbody, licenses, selected, onSelect) {
  const seen = new Set();
  let prev = null;
  for (const l of licenses) {
    seen.add(l.id);
    let row = rows.get(l.id);
    if (!row) {
      row = makeRow(l.id, onSelect);
      rows.set(l.id, row);
    }
    row.license = l;
    const c = row.cells;
    const st = status(l);
    setText(c.count, `${fmtCount(l.live)} / ${fmtCount(l.seats)}`);
    setText(c.free, fmtCount(Math.max(0, l.seats - l.live)));
    setText(c.waiting, l.waiting ? `⏳ ${fmtCount(l.waiting)}` : '—');
    setAttr(c.waiting, 'title', l.waiting ? `${fmtCount(l.waiting)} checkouts waiting in line` : null);
    const groups = l.groups || [];
    policyCount(c.reserved, groups.length > 0, l.reserved || 0, 'groups with a reserve');
    policyCount(c.lingering, l.linger_s != null, l.lingering || 0, 'linger');
    policyCount(c.borrowed, l.borrow != null, l.borrowed || 0, 'borrowing');
    if (l.linger_s != null) setAttr(c.lingering, 'title', `released seats count for ${fmtSeconds(l.linger_s)}`);
    renderGroups(c.groups, groups);
    setText(c.ttl, fmtSeconds(l.ttl_s));
    setText(c.status, st.text);
    setAttr(c.status, 'title', st.cls === 'over' ? `${fmtCount(l.live)} live of ${fmtCount(l.seats)} seats; overage allows ${fmtCount(l.overage || 0)} more` : null);
    const frac = l.seats > 0 ? Math.min(1, l.live / l.seats) : 1;
    setAttr(c.fill, 'width', Math.round(frac * GAUGE_W));
    const firing = l.alerts_firing || [];
    renderAlerts(c.alerts, firing);
    setAttr(row.tr, 'class', [st.cls, firing.length ? 'alerting' : '', l.id === selected ? 'selected' : ''].filter(Boolean).join(' '));
    setAttr(c.pick, 'aria-pressed', l.id === selected ? 'true' : 'false');
    setAttr(c.pick, 'title', l.id === selected ? 'Show every pool' : `Show only ${l.id}: holders and history`);
    if (st.cls !== 'full' && st.cls !== 'over') freesAt.delete(l.id);
    // Insert or move only when out of place, so rows never blink.
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== row.tr) tbody.insertBefore(row.tr, want);
    prev = row.tr;
  }
  for (const [id, row] of rows) {
    if (!seen.has(id)) {
      row.tr.remove();
      rows.delete(id);
      freesAt.delete(id);
    }
  }
  tickPools();
}

/** Drop every row (signed out: nothing of the last sign-in stays). */
export function clearPools() {
  for (const row of rows.values()) row.tr.remove();
  rows.clear();
  freesAt.clear();
}

/** The full pools, for which the caller looks up the next expiry. */
export function fullPools() {
  return Array.from(rows.values())
    .filter((r) => r.license && r.license.live >= r.license.seats && r.license.seats > 0)
    .map((r) => r.license);
}

/** A full pool's next seat frees at `ms` (server time), or null if unknown. */
export function setFreesAt(id, ms) {
  if (ms === null) freesAt.delete(id);
  else freesAt.set(id, ms);
  tickPools();
}

/** Once a second: only the "next seat frees in" texts change. */
export function tickPools() {
  const now = clock.now();
  for (const [id, row] of rows) {
    const at = freesAt.get(id);
    if (at === undefined) {
      setText(row.cells.frees, '');
      continue;
    }
    const left = at - now;
    setText(row.cells.frees, left > 0 ? ` · next seat frees in ${fmtDuration(left)}` : ' · next seat frees any moment');
    setAttr(row.cells.frees, 'title', `${fmtTime(at)} local · ${utcTitle(at)} (unless its holder renews it)`);
  }
}
