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
//
// A license with a vendor (its seats granted by the vendor's signed
// entitlements) says so: `entitled 10` under its live/seats (the licenses
// file may narrow them), its customer beside its name, and, in its
// status, the term as a warning: `⏳ 12d` while the entitled seats drop
// within 30 days, `grace 3d` in grace, `expired` when nothing grants a
// seat. A license without a vendor shows none of it.

import { el, setText, setAttr, svg } from './dom.js';
import { clock, fmtCount, fmtDaysLeft, fmtDuration, fmtSeconds, utcTitle, fmtTime, fmtDateTime } from './format.js';

const GAUGE_W = 120;
const GAUGE_H = 12;
/** The term shows once the entitled seats drop within this. */
const TERM_SOON_MS = 30 * 86400000;

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

/**
 * The entitlement's term at `now` (server ms): `{ text, cls, title }`, or
 * null when there is nothing to say (no vendor, or the drop is far off).
 */
function term(l, now) {
  if (l.vendor == null) return null;
  if (l.entitled_seats === 0) {
    return { text: 'expired', cls: 'ended', title: `no entitlement from ${l.vendor} grants a seat now: checkouts are refused (not_entitled)` };
  }
  const at = l.entitlement_ends_at ? Date.parse(l.entitlement_ends_at) : NaN;
  const when = Number.isNaN(at) ? '' : `${fmtDateTime(at)} local · ${utcTitle(at)}`;
  if (l.in_grace) {
    return {
      text: when ? `grace ${fmtDaysLeft(at - now)}` : 'grace',
      cls: 'warn',
      title: `in grace: the term of ${l.vendor}'s entitlement has ended${when ? `; its seats drop at ${when}` : ''}`,
    };
  }
  if (Number.isNaN(at) || at - now > TERM_SOON_MS) return null;
  return { text: `⏳ ${fmtDaysLeft(at - now)}`, cls: 'warn', title: `the entitled seats drop at ${when}` };
}

/** The customer beside a vendor pool's name, and the entitled seats under its count. */
function renderEntitlement(c, l) {
  const vendored = l.vendor != null;
  setText(c.customer, vendored && l.customer ? l.customer : '');
  setAttr(c.customer, 'title', vendored ? `customer ${l.customer || 'not named'} · vendor ${l.vendor}${l.versions ? ` · versions ${l.versions}` : ''}` : null);
  const entitled = vendored ? l.entitled_seats || 0 : null;
  setText(c.entitled, vendored ? `entitled ${fmtCount(entitled)}` : '');
  let why = null;
  if (vendored) {
    why = `${l.vendor}'s entitlements grant ${fmtCount(entitled)} seats`;
    if (l.seats < entitled) why += `; the licenses file narrows them to ${fmtCount(l.seats)}`;
  }
  setAttr(c.entitled, 'title', why);
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
    used: el('span', { class: 'used' }),
    entitled: el('span', { class: 'entitled', 'data-field': 'entitled' }),
    customer: el('span', { class: 'customer', 'data-field': 'customer' }),
    term: el('span', { class: 'term', 'data-field': 'term' }),
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
    el('th', { scope: 'row' }, pick, cells.customer),
    el('td', {}, g),
    el('td', { class: 'num count' }, cells.used, cells.entitled),
    cells.free,
    cells.waiting,
    cells.reserved,
    cells.lingering,
    cells.borrowed,
    el('td', {}, cells.groups),
    cells.ttl,
    el('td', {}, cells.status, cells.term, cells.frees, cells.alerts),
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
    setText(c.used, `${fmtCount(l.live)} / ${fmtCount(l.seats)}`);
    renderEntitlement(c, l);
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

/** Once a second: only the "next seat frees in" and term texts change. */
export function tickPools() {
  const now = clock.now();
  for (const [id, row] of rows) {
    const t = row.license && term(row.license, now);
    setText(row.cells.term, t ? t.text : '');
    setAttr(row.cells.term, 'class', t ? `term ${t.cls}` : 'term');
    setAttr(row.cells.term, 'title', t ? t.title : null);
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
