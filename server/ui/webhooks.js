// The webhooks panel: one `<tr data-webhook="NAME">` per `[[webhook]]` of
// the licenses file (`GET /v1/admin/webhooks`): format, URL, its stored
// deliveries by status (pending, delivered, failed), the last success and
// the last error; below it one `<li data-alert="NAME">` per alert
// (`GET /v1/admin/alerts`), firing ones first. Refreshed every 5 s and soon
// after an event (deliveries are queued by events), paused with the page.
// Admins get a "Send test" button per webhook (`POST
// /v1/admin/webhooks/{name}/test`); a viewer's page renders none.
// A server without these endpoints (404), or a licenses file with neither
// webhooks nor alerts, hides the panel.

import { getJson, request, HttpError, BACKGROUND } from './api.js';
import { el, setText, setAttr } from './dom.js';
import { clock, fmtCount, fmtDuration, fmtTime, utcTitle } from './format.js';

/** Rows by webhook name, reused across refreshes (no flicker). */
const rows = new Map();

function makeRow(name, onTest) {
  const cells = {
    format: el('td'),
    url: el('td', { class: 'mono url' }),
    pending: el('td', { class: 'num', 'data-field': 'pending' }),
    delivered: el('td', { class: 'num', 'data-field': 'delivered' }),
    failed: el('td', { class: 'num', 'data-field': 'failed' }),
    success: el('td', { 'data-field': 'last-success' }),
    error: el('td', { class: 'error-text', 'data-field': 'last-error' }),
    actions: el('td', { class: 'actions' }),
  };
  const test = el('button', { type: 'button', 'data-action': 'test-webhook' }, '✉ Send test');
  test.addEventListener('click', () => onTest(name, test));
  const tr = el(
    'tr',
    { 'data-webhook': name },
    el('th', { scope: 'row' }, name),
    cells.format,
    cells.url,
    cells.pending,
    cells.delivered,
    cells.failed,
    cells.success,
    cells.error,
    cells.actions,
  );
  return { tr, cells, test };
}

/** `12 s ago` on the server's clock, UTC on hover. */
function ago(cell, at) {
  if (!at) {
    setText(cell, '—');
    setAttr(cell, 'title', 'never');
    return;
  }
  const ms = Date.parse(at);
  setText(cell, `${fmtTime(ms)} (${fmtDuration(Math.max(0, clock.now() - ms))} ago)`);
  setAttr(cell, 'title', utcTitle(ms));
}

function renderWebhooks(tbody, webhooks, isAdmin, onTest) {
  const seen = new Set();
  let prev = null;
  for (const w of webhooks) {
    seen.add(w.name);
    let row = rows.get(w.name);
    if (!row) {
      row = makeRow(w.name, onTest);
      rows.set(w.name, row);
    }
    const c = row.cells;
    setText(c.format, w.format);
    setText(c.url, w.url);
    setAttr(c.url, 'title', (w.events || []).length ? `forwards: ${w.events.join(', ')}` : 'forwards alerts only');
    setText(c.pending, fmtCount(w.pending));
    setText(c.delivered, fmtCount(w.delivered));
    setText(c.failed, fmtCount(w.failed));
    ago(c.success, w.last_success_at);
    setText(c.error, w.last_error ? `⚠ ${w.last_error}` : '—');
    setAttr(c.error, 'title', w.last_error || null);
    const cls = [w.last_error ? 'failing' : '', w.pending > 0 ? 'pending' : '', w.failed > 0 ? 'has-failed' : ''];
    setAttr(row.tr, 'class', cls.filter(Boolean).join(' ') || null);
    // Admins only: a viewer's page has no test button at all.
    if (isAdmin && !row.test.isConnected) c.actions.append(row.test);
    if (!isAdmin && row.test.isConnected) row.test.remove();
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== row.tr) tbody.insertBefore(row.tr, want);
    prev = row.tr;
  }
  for (const [name, row] of rows) {
    if (!seen.has(name)) {
      row.tr.remove();
      rows.delete(name);
    }
  }
}

/** An alert's condition as the licenses file says it. */
function condition(a) {
  const s = a.alert;
  const forText = s.for ? ` for ${s.for}` : '';
  if (s.when === 'usage') return `usage ≥ ${s.percent}%${forText}`;
  if (s.when === 'denials') return `${s.count} denials within ${s.within}`;
  return `${s.when}${forText}`;
}

function renderAlerts(ul, alerts) {
  const sorted = [...alerts].sort((a, b) => Number(b.firing) - Number(a.firing));
  const key = JSON.stringify(sorted);
  if (ul.dataset.key === key) return;
  ul.dataset.key = key;
  ul.replaceChildren(
    ...sorted.map((a) => {
      const since = a.since ? Date.parse(a.since) : null;
      let state = '● ok';
      if (a.firing) state = '▲ FIRING';
      else if (since) state = '◔ holding';
      const when = since ? ` since ${fmtTime(since)}` : '';
      return el(
        'li',
        { 'data-alert': a.alert.name, 'data-license': a.license_id, class: a.firing ? 'firing' : null, title: since ? utcTitle(since) : null },
        el('span', { class: 'alert-state' }, state),
        ' ',
        el('b', {}, a.alert.name),
        ` on ${a.license_id}: ${condition(a)}${when}`,
      );
    }),
  );
}

export class WebhooksPanel {
  /** `section`: the `#webhooks` panel. `isAdmin()`: may send tests. */
  constructor(section, isAdmin) {
    this.section = section;
    this.isAdmin = isAdmin;
    this.tbody = section.querySelector('#webhooks-table tbody');
    this.alerts = section.querySelector('[data-alerts]');
    this.alertsBlock = section.querySelector('#webhooks-alerts');
    this.empty = section.querySelector('#webhooks-empty');
    this.note = section.querySelector('#webhooks-note');
    this.timer = null;
    this.busy = false;
    this.paused = false;
  }

  start(everyMs = 5000) {
    this.stop();
    this.refresh();
    this.timer = setInterval(() => this.refresh(BACKGROUND), everyMs);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }

  setPaused(paused) {
    this.paused = paused;
    if (!paused) this.refresh();
  }

  /** Fetch both lists and show them; quiet while paused or already fetching. */
  async refresh(opts = {}) {
    if (this.busy || (this.paused && opts.background)) return;
    this.busy = true;
    try {
      const [w, a] = await Promise.all([getJson('/v1/admin/webhooks', opts), getJson('/v1/admin/alerts', opts)]);
      // Nothing configured: no panel (the page looks as it did before).
      this.section.hidden = w.webhooks.length === 0 && a.alerts.length === 0;
      renderWebhooks(this.tbody, w.webhooks, this.isAdmin(), (name, button) => this.test(name, button));
      this.empty.hidden = w.webhooks.length > 0;
      renderAlerts(this.alerts, a.alerts);
      this.alertsBlock.hidden = a.alerts.length === 0;
    } catch (e) {
      // A server without webhooks: no panel. Other failures keep the
      // last lists (the connection banner says why).
      if (e instanceof HttpError && e.status === 404) this.section.hidden = true;
    } finally {
      this.busy = false;
    }
  }

  async test(name, button) {
    button.disabled = true;
    try {
      const { id } = await request('POST', `/v1/admin/webhooks/${encodeURIComponent(name)}/test`);
      setText(this.note, `Test delivery ${id} queued to ${name}.`);
      this.note.classList.remove('error');
    } catch (e) {
      setText(this.note, `Could not queue a test to ${name}: ${e.message}`);
      this.note.classList.add('error');
    } finally {
      this.note.hidden = false;
      button.disabled = false;
      this.refresh();
    }
  }

  /** Signed out: nothing of the last sign-in stays. */
  clear() {
    this.stop();
    for (const row of rows.values()) row.tr.remove();
    rows.clear();
    this.alerts.replaceChildren();
    delete this.alerts.dataset.key;
    this.note.hidden = true;
    this.section.hidden = true;
  }
}
