// The pools table: one `<tr data-license>` per license, updated in place.
// A full pool stands out (class, glyph and word, not colour alone) and says
// when its next seat frees: the earliest live lease's expiry + skew, if
// nobody renews it, on the server's clock.

import { el, setText, setAttr, svg } from './dom.js';
import { clock, fmtDuration, fmtSeconds, utcTitle, fmtTime } from './format.js';

const GAUGE_W = 120;
const GAUGE_H = 12;

/** Rows by license id, reused across refreshes. */
const rows = new Map();
/** license id → ms when its next seat frees (full pools only). */
const freesAt = new Map();

/** The pool's status: glyph + word, and a class for the colour. */
function status(l) {
  if (l.live >= l.seats) return { text: '■ FULL', cls: 'full' };
  if (l.live * 5 >= l.seats * 4) return { text: '▲ busy', cls: 'busy' };
  return { text: '● ok', cls: 'ok' };
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
    ttl: el('td', { class: 'num' }),
    status: el('span', { class: 'status' }),
    frees: el('span', { class: 'frees' }),
  };
  const tr = el(
    'tr',
    { 'data-license': id },
    el('th', { scope: 'row' }, pick),
    el('td', {}, g),
    cells.count,
    cells.free,
    cells.waiting,
    cells.ttl,
    el('td', {}, cells.status, cells.frees),
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
    setText(c.count, `${l.live} / ${l.seats}`);
    setText(c.free, String(Math.max(0, l.seats - l.live)));
    setText(c.waiting, l.waiting ? `⏳ ${l.waiting}` : '—');
    setAttr(c.waiting, 'title', l.waiting ? `${l.waiting} checkouts waiting in line` : null);
    setText(c.ttl, fmtSeconds(l.ttl_s));
    setText(c.status, st.text);
    const frac = l.seats > 0 ? Math.min(1, l.live / l.seats) : 1;
    setAttr(c.fill, 'width', Math.round(frac * GAUGE_W));
    setAttr(row.tr, 'class', [st.cls, l.id === selected ? 'selected' : ''].join(' ').trim());
    setAttr(c.pick, 'aria-pressed', l.id === selected ? 'true' : 'false');
    setAttr(c.pick, 'title', l.id === selected ? 'Show every pool' : `Show only ${l.id}: holders and history`);
    if (st.cls !== 'full') freesAt.delete(l.id);
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

/** Drop every row (signed out: nothing of the last session stays). */
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
