// The live event feed: `GET /v1/admin/events/stream` through EventSource
// (it sends the sign-in cookie, and on a dropped connection it reconnects
// with `Last-Event-ID`, so nothing is lost or repeated). The list keeps the
// newest events; each is `<li data-event-id>` with its kind as a word, a
// glyph and a colour of its own (`.k-<kind>` in app.css): `§ entitlement`
// for what the entitlements directory did (loaded, rejected, grace, ...).

import { getJson, withQuery, link, BACKGROUND } from './api.js';
import { el } from './dom.js';
import { fmtTime, utcTitle, shortId } from './format.js';

const KEEP = 200;
const BACKLOG = 50;
const GLYPH = { checkout: '+', release: '−', reap: '†', revoke: '✗', denied: '!', lost: '?', config: '⚙', reclaim: 'z', alert: '▲', entitlement: '§' };

/**
 * The newest event id, by probing `?after=X&limit=1` (the API lists
 * ascending ids and has no "latest" query): doubling, then bisecting —
 * about 2·log2(n) tiny requests instead of reading the whole log.
 */
async function lastEventId() {
  const exists = async (after) =>
    (await getJson(withQuery('/v1/admin/events', { after, limit: 1 }), BACKGROUND)).events[0];
  let first = await exists(0);
  if (!first) return 0;
  let lo = first.id; // an id that exists
  let hi = lo;
  for (;;) {
    const ev = await exists(hi);
    if (!ev) break;
    lo = ev.id;
    hi = Math.max(hi * 2, lo + 1);
  }
  // Invariant: some event has id >= lo; none has id > hi.
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    const ev = await exists(mid - 1);
    if (ev) lo = Math.max(mid, ev.id);
    else hi = mid - 1;
  }
  return lo;
}

export class EventFeed {
  /**
   * `list`: the `[data-events]` element. `onEvent(ev)`: every new event
   * (live, in order). `onState(state)`: 'connected' | 'reconnecting'.
   */
  constructor(list, { onEvent, onState }) {
    this.list = list;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastId = 0;
    this.source = null;
    this.paused = false;
    this.held = [];
    this.retry = null;
  }

  async start() {
    const last = await lastEventId();
    this.lastId = Math.max(0, last - BACKLOG);
    this.open();
  }

  open() {
    this.close();
    // `after` only matters for a fresh EventSource: its own reconnects send
    // Last-Event-ID, which the server prefers.
    const es = new EventSource(withQuery('/v1/admin/events/stream', { after: this.lastId }));
    this.source = es;
    es.onopen = () => this.onState('connected');
    es.onmessage = (m) => this.receive(m);
    es.onerror = () => {
      if (this.source !== es) return;
      this.onState('reconnecting');
      link.report(false, 'the event stream is broken');
      // CLOSED: the browser gave up (an error status, e.g. a proxy's 502).
      // Open a new one ourselves, resuming after the last id seen.
      if (es.readyState === EventSource.CLOSED) this.reopenSoon();
    };
  }

  reopenSoon(ms = 1000) {
    clearTimeout(this.retry);
    this.retry = setTimeout(() => this.open(), ms);
  }

  /** The server answered again: reconnect now instead of on the browser's backoff. */
  kick() {
    if (this.source && this.source.readyState !== EventSource.OPEN) this.open();
  }

  close() {
    clearTimeout(this.retry);
    if (this.source) this.source.close();
    this.source = null;
  }

  receive(m) {
    let ev;
    try {
      ev = JSON.parse(m.data);
    } catch {
      return;
    }
    if (typeof ev.id !== 'number' || ev.id <= this.lastId) return;
    this.lastId = ev.id;
    if (this.paused) {
      this.held.push(ev);
      if (this.held.length > KEEP) this.held.shift();
      return;
    }
    this.show(ev);
    this.onEvent(ev);
  }

  /** Pause: events are kept, not shown; resume shows them at once. */
  setPaused(paused) {
    this.paused = paused;
    if (!paused) {
      const held = this.held;
      this.held = [];
      for (const ev of held) this.show(ev);
      if (held.length) this.onEvent(held[held.length - 1]);
    }
  }

  show(ev) {
    const at = Date.parse(ev.at);
    const kind = String(ev.kind);
    const parts = [
      el('time', { datetime: ev.at, title: utcTitle(at) }, fmtTime(at)),
      el('span', { class: `kind k-${kind.replace(/[^a-z]/g, '')}` }, `${GLYPH[kind] || '•'} ${kind}`),
    ];
    const field = (label, value, cls) => {
      if (value === null || value === undefined || value === '') return;
      parts.push(el('span', { class: `f ${cls || ''}`.trim() }, el('span', { class: 'label' }, label), value));
    };
    field('pool ', ev.license_id);
    field('holder ', ev.holder, 'holder');
    if (ev.seat_id) {
      parts.push(el('span', { class: 'f mono', title: ev.seat_id }, el('span', { class: 'label' }, 'seat '), shortId(ev.seat_id)));
    }
    field('', ev.detail, 'detail');
    const li = el('li', { 'data-event-id': ev.id }, ...parts);
    this.list.prepend(li);
    while (this.list.childElementCount > KEEP) this.list.lastElementChild.remove();
  }
}
