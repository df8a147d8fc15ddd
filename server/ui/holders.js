// The holders table: one page of seats (the server filters, sorts and pages;
// only the rows of this page exist in the DOM, so 100,000 holders cost what
// 100 do). Rows are keyed by seat id and updated in place; the once-a-second
// tick touches only the time cells (and a state cell when the state changes).
// The Idle column is there only while some seat of the page reports its user
// idle (as in `leasehold seats` and the console).

import { getJson, withQuery } from './api.js';
import { el, setText, setAttr } from './dom.js';
import { clock, fmtDuration, fmtTime, fmtDateTime, utcTitle, shortId, fmtCount } from './format.js';

export const PAGE_SIZE = 100;

/** seat id → { tr, cells, seat } for the rows on the page, in order. */
const rows = new Map();
let order = [];
/** license id → { ttl_ms, skew_ms }, for the row state. */
let policies = new Map();

export function setPolicies(licenses) {
  policies = new Map(licenses.map((l) => [l.id, { ttl: l.ttl_s * 1000, skew: l.skew_s * 1000 }]));
}

/**
 * `live`, `expiring` (under a third of the TTL left), `lapsed`, or the
 * server's `lingering` (released, still counting) and `borrowed` (their
 * expiry is the linger's or borrow's end, never "expiring"); as the console.
 */
function rowState(seat, now) {
  const p = policies.get(seat.license_id) || { ttl: 30000, skew: 0 };
  if (seat.state === 'lapsed' || now > seat.expiresMs + p.skew) return 'lapsed';
  if (seat.state === 'lingering' || seat.state === 'borrowed') return seat.state;
  return seat.expiresMs - now < p.ttl / 3 ? 'expiring' : 'live';
}

const STATE_TEXT = {
  live: '● live',
  expiring: '▲ expiring',
  lapsed: '✗ lapsed',
  lingering: '◌ lingering',
  borrowed: '⇄ borrowed',
};

/**
 * One page from the server, which filters (`q`), sorts and pages (keyset
 * cursor `after`): `{seats, total, next, now}`.
 */
export async function fetchPage(view, cursor, limit = PAGE_SIZE, opts = {}) {
  const path = withQuery('/v1/admin/seats', {
    license: view.pool,
    q: view.q,
    sort: view.sort,
    order: view.order,
    limit,
    after: cursor,
  });
  const resp = await getJson(path, opts);
  clock.sync(resp.now);
  if (typeof resp.total !== 'number') resp.total = resp.seats.length;
  return resp;
}

function makeRow(seat, isAdmin, onRevoke) {
  const cells = {
    license: el('td'),
    holder: el('td', { class: 'holder' }),
    fingerprint: el('td', { class: 'mono' }),
    seat: el('td', { class: 'mono' }),
    held: el('td', { class: 'num tick' }),
    expires: el('td', { class: 'num tick' }),
    state: el('td', { class: 'state' }),
    stateWord: el('span', { 'data-field': 'state' }),
    // When a borrowed seat comes back (empty for any other seat).
    backAt: el('span', { class: 'back-at', 'data-field': 'back-at' }),
    idle: el('td', { class: 'num tick idle', 'data-field': 'idle' }),
    group: el('td', { class: 'group' }),
    actions: el('td', { class: 'actions' }),
  };
  cells.state.append(cells.stateWord, cells.backAt);
  const { stateWord, backAt, ...tds } = cells;
  const tr = el('tr', { 'data-seat-id': seat.seat_id, 'aria-selected': 'false' }, ...Object.values(tds));
  // A viewer's page has no revoke button at all, not even a disabled one.
  if (isAdmin) {
    const btn = el('button', { type: 'button', 'data-action': 'revoke', class: 'danger small' }, '✗ Revoke');
    btn.addEventListener('click', () => onRevoke(seat.seat_id));
    cells.actions.append(btn);
  }
  return { tr, cells, seat, state: '' };
}

function fillRow(row, seat) {
  const c = row.cells;
  row.seat = seat;
  setText(c.license, seat.license_id);
  setText(c.holder, seat.holder);
  setText(c.fingerprint, seat.fingerprint ?? '—');
  setText(c.seat, shortId(seat.seat_id));
  setText(c.group, seat.group ?? '—');
  setAttr(c.seat, 'title', seat.seat_id);
  setAttr(c.held, 'title', `since ${fmtTime(seat.checkedMs)} · ${utcTitle(seat.checkedMs)}`);
  setAttr(c.expires, 'title', `at ${fmtTime(seat.expiresMs)} · ${utcTitle(seat.expiresMs)}`);
  fillBackAt(c.backAt, seat);
  const btn = c.actions.firstChild;
  if (btn) setAttr(btn, 'aria-label', `Revoke ${seat.holder}'s seat ${shortId(seat.seat_id)} of ${seat.license_id}`);
}

/** A borrowed seat's return: its expiry, in the viewer's zone (UTC on hover). */
function fillBackAt(span, seat) {
  const borrowed = seat.state === 'borrowed';
  setText(span, borrowed ? ` · back ${fmtDateTime(seat.expiresMs)}` : '');
  setAttr(span, 'title', borrowed ? `comes back at ${utcTitle(seat.expiresMs)}` : null);
}

/** Update one row's time cells (and its state when it changed) for `now`. */
function tickRow(row, now) {
  const s = row.seat;
  setText(row.cells.held, fmtDuration(now - s.checkedMs));
  setText(row.cells.expires, fmtDuration(s.expiresMs - now));
  setText(row.cells.idle, s.idleSinceMs === null ? '—' : fmtDuration(now - s.idleSinceMs));
  const st = rowState(s, now);
  if (st !== row.state) {
    row.state = st;
    setText(row.cells.stateWord, STATE_TEXT[st]);
    // Past its end a borrowed seat is just lapsed: no return time.
    row.cells.backAt.hidden = st !== 'borrowed';
    row.tr.classList.remove(...Object.keys(STATE_TEXT));
    row.tr.classList.add(st);
  }
}

/**
 * Show `seats` (one page), reusing the rows of seats still on it, so an
 * update never rebuilds the table. Returns the seat ids in order.
 */
export function renderHolders(tbody, seats, { isAdmin, onRevoke }) {
  // Just synced to the page's `now`: its `idle_s` are as of this instant,
  // and run on with the countdowns until the next fetch.
  const now = clock.now();
  const keep = new Set();
  let prev = null;
  tbody.closest('table').classList.toggle('has-idle', seats.some((s) => typeof s.idle_s === 'number'));
  for (const raw of seats) {
    const seat = {
      ...raw,
      expiresMs: Date.parse(raw.expires_at),
      checkedMs: Date.parse(raw.checked_out_at),
      idleSinceMs: typeof raw.idle_s === 'number' ? now - raw.idle_s * 1000 : null,
    };
    keep.add(seat.seat_id);
    let row = rows.get(seat.seat_id);
    if (!row) {
      row = makeRow(seat, isAdmin, onRevoke);
      rows.set(seat.seat_id, row);
    }
    fillRow(row, seat);
    tickRow(row, now);
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== row.tr) tbody.insertBefore(row.tr, want);
    prev = row.tr;
  }
  for (const [id, row] of rows) {
    if (!keep.has(id)) {
      row.tr.remove();
      rows.delete(id);
    }
  }
  order = seats.map((s) => s.seat_id);
  return order;
}

/** Drop every row (a role change rebuilds them with or without buttons). */
export function clearHolders() {
  for (const row of rows.values()) row.tr.remove();
  rows.clear();
  order = [];
}

/** Once a second: the time cells of the rows on the page, nothing else. */
export function tickHolders() {
  const now = clock.now();
  for (const row of rows.values()) tickRow(row, now);
}

/** The seat shown in row `id`, if it is on the page. */
export function seatOf(id) {
  const row = rows.get(id);
  return row ? row.seat : null;
}

/** Seat ids on the page, top to bottom. */
export function pageOrder() {
  return order;
}

/** Mark `id` as the selected row (keyboard cursor); returns its row. */
export function markSelected(id) {
  let found = null;
  for (const [sid, row] of rows) {
    const on = sid === id;
    setAttr(row.tr, 'aria-selected', on ? 'true' : 'false');
    if (on) found = row.tr;
  }
  return found;
}

/** "1–100 of 100,000" for the page that starts at row `offset`. */
export function countText(offset, shown, total) {
  if (total === 0) return 'none';
  return `${fmtCount(offset + 1)}–${fmtCount(offset + shown)} of ${fmtCount(total)}`;
}
