// The dashboard: sign-in, then pools, holders, a pool's history and the
// live event feed. Data is re-fetched when an event says it changed
// (throttled), never by reloading; the view (pool, filter, sort) is the URL.

import { getJson, request, setCsrf, link, whenUnauthorized, NetworkError, BACKGROUND } from './api.js';
import { $, $$, setText, throttle, debounce } from './dom.js';
import { clock, fmtTime, utcTitle } from './format.js';
import { readUrl, writeUrl, endBurst } from './url_state.js';
import { renderPools, tickPools, fullPools, setFreesAt, clearPools } from './pools.js';
import * as holders from './holders.js';
import { EventFeed } from './events.js';
import { initRevoke, openRevoke } from './revoke.js';
import { showHistory, moreSessions } from './history.js';
import { bindKeys, openHelp } from './keys.js';
import { fetchSignIn, showLogin } from './login.js';
import { initTheme } from './theme.js';
import { WebhooksPanel } from './webhooks.js';

const S = {
  signIn: null,
  view: readUrl(),
  cursors: [null], // cursor of each page up to the current one
  next: null,
  total: 0,
  selected: null, // seat id under the keyboard cursor
  paused: false,
  feed: null,
  lastGood: null, // when data last arrived (local ms)
  retry: null,
  tick: null,
  poll: null,
  polling: false,
  webhooks: null,
};

const table = () => $('#holders');
const isAdmin = () => S.signIn && S.signIn.role === 'admin';

// ---- data ----------------------------------------------------------------

async function refreshPools(opts = {}) {
  const resp = await getJson('/v1/admin/licenses', opts);
  clock.sync(resp.now);
  holders.setPolicies(resp.licenses);
  renderPools($('#pools tbody'), resp.licenses, S.view.pool, selectPool);
  S.lastGood = Date.now();
  // When does a full pool's next seat free? Its earliest expiry (+ skew).
  for (const l of fullPools()) {
    holders
      .fetchPage({ pool: l.id, q: '', sort: 'expires_at', order: 'asc' }, null, 1, BACKGROUND)
      .then((page) => {
        const first = page.seats.find((s) => s.state === 'live') || page.seats[0];
        setFreesAt(l.id, first ? Date.parse(first.expires_at) + l.skew_s * 1000 : null);
      })
      .catch(() => {});
  }
}

async function refreshHolders(opts = {}) {
  const cursor = S.cursors[S.cursors.length - 1];
  const page = await holders.fetchPage(S.view, cursor, undefined, opts);
  if (page.seats.length === 0 && S.cursors.length > 1) {
    // The page emptied (seats went away): back to the first page.
    S.cursors = [null];
    return refreshHolders(opts);
  }
  S.next = page.next;
  S.total = page.total;
  const ids = holders.renderHolders($('#holders tbody'), page.seats, { isAdmin: isAdmin(), onRevoke: revokeSeat });
  const offset = (S.cursors.length - 1) * holders.PAGE_SIZE;
  setText($('#holders-count'), holders.countText(offset, ids.length, page.total));
  $('[data-action="prev"]').disabled = S.cursors.length <= 1;
  $('[data-action="first"]').disabled = S.cursors.length <= 1;
  $('[data-action="next"]').disabled = !page.next;
  $('#holders-empty').hidden = ids.length > 0;
  setText($('#holders-empty'), S.view.q ? 'No holder matches the filter.' : 'No holders.');
  if (S.selected && !ids.includes(S.selected)) S.selected = ids[0] || null;
  if (S.selected) holders.markSelected(S.selected);
  S.lastGood = Date.now();
}

/**
 * Everything on screen, again. Errors are shown by the link listener.
 * `opts`: BACKGROUND when the page refreshes by itself.
 */
async function refreshAll(opts = {}) {
  try {
    await Promise.all([refreshPools(opts), refreshHolders(opts)]);
  } catch (e) {
    if (!(e instanceof NetworkError)) console.warn('refresh failed:', e.message);
  }
}

// An event means something changed: fetch once per burst, but at least
// every 400 ms under a steady stream, well inside the 1 s promise.
const refreshSoon = throttle(() => {
  if (!S.paused) refreshAll(BACKGROUND);
}, 120, 400);
const historySoon = throttle(() => {
  if (!S.paused && S.view.pool) showHistory(S.view.pool, S.view.range, { refresh: true, background: true });
}, 2000, 5000);

// Heartbeats are not events: a renewed expiry or a seat's report of
// idleness reaches the page by this quiet refetch of the holders page (as
// in the console), skipped while paused, retrying or already fetching.
const POLL_MS = 5000;

async function pollHolders() {
  if (S.paused || S.retry || S.polling) return;
  S.polling = true;
  try {
    await refreshHolders(BACKGROUND);
  } catch (e) {
    if (!(e instanceof NetworkError)) console.warn('refresh failed:', e.message);
  } finally {
    S.polling = false;
  }
}

// Events queue deliveries (and an `alert` event is a transition): the
// webhooks panel follows soon after, besides its own 5 s refresh.
const webhooksSoon = throttle(() => {
  if (!S.paused && S.webhooks) S.webhooks.refresh(BACKGROUND);
}, 500, 2000);

function onEvent(ev) {
  refreshSoon();
  webhooksSoon();
  if (ev.license_id && ev.license_id === S.view.pool) historySoon();
}

// ---- view changes ------------------------------------------------------

function applyView() {
  const v = S.view;
  $('#filter').value = v.q;
  for (const th of $$('#holders th[data-sort]')) {
    const on = th.dataset.sort === v.sort;
    if (on) th.setAttribute('aria-sort', v.order === 'asc' ? 'ascending' : 'descending');
    else th.removeAttribute('aria-sort');
  }
  setText($('#holders-scope'), v.pool ? `of ${v.pool}` : 'of every pool');
  $('[data-action="all-pools"]').hidden = !v.pool;
  S.cursors = [null];
  showHistory(v.pool, v.range);
}

function changeView(patch, opts) {
  S.view = { ...S.view, ...patch };
  writeUrl(S.view, opts);
  applyView();
  refreshAll();
}

function selectPool(id) {
  changeView({ pool: S.view.pool === id ? '' : id });
}

function sortBy(key) {
  const order = S.view.sort === key && S.view.order === 'asc' ? 'desc' : 'asc';
  changeView({ sort: key, order });
}

function page(delta) {
  if (delta > 0 && S.next) S.cursors.push(S.next);
  else if (delta < 0 && S.cursors.length > 1) S.cursors.pop();
  else if (delta === 0) S.cursors = [null];
  else return;
  S.selected = null;
  refreshHolders().then(() => move(0)).catch(() => {});
}

function move(delta) {
  const ids = holders.pageOrder();
  if (!ids.length) return;
  let i = ids.indexOf(S.selected);
  if (i < 0) i = delta < 0 ? ids.length - 1 : 0;
  else i = Math.max(0, Math.min(ids.length - 1, i + (Number.isFinite(delta) ? delta : delta > 0 ? ids.length : -ids.length)));
  S.selected = ids[i];
  const tr = holders.markSelected(S.selected);
  if (tr) tr.scrollIntoView({ block: 'nearest' });
}

function revokeSeat(seatId) {
  const seat = holders.seatOf(seatId);
  if (!seat || !isAdmin()) return;
  S.selected = seatId;
  holders.markSelected(seatId);
  openRevoke(seat, table());
}

// ---- connection --------------------------------------------------------

function showConnection() {
  const badge = $('[data-connection]');
  // Signed out there is no stream to speak of.
  badge.hidden = !S.signIn;
  const streamUp = S.feed && S.feed.source && S.feed.source.readyState === EventSource.OPEN;
  let state;
  if (!link.up) state = 'disconnected';
  else if (!streamUp) state = 'reconnecting';
  else state = 'connected';
  badge.dataset.state = state;
  setText(badge, { connected: '● connected', reconnecting: '◌ reconnecting…', disconnected: '✗ disconnected' }[state]);
  const banner = $('#banner');
  if (state === 'disconnected') {
    const kept = S.lastGood ? `showing data from ${fmtTime(S.lastGood)}` : 'no data yet';
    setText(banner, `⚠ Disconnected: ${link.error || 'the server is not answering'}. Retrying by itself — ${kept}.`);
    if (S.lastGood) banner.title = utcTitle(S.lastGood);
    banner.hidden = false;
  } else {
    banner.hidden = true;
  }
}

function onLink(up) {
  showConnection();
  clearInterval(S.retry);
  S.retry = null;
  if (!S.signIn) return;
  if (up) {
    if (S.feed) S.feed.kick();
    refreshAll(BACKGROUND);
  } else {
    // Keep the last data; try again every second until the server answers.
    S.retry = setInterval(() => refreshAll(BACKGROUND), 1000);
  }
}

// ---- sign-in -----------------------------------------------------------

function scheduleTick() {
  // Tick on the server clock's second boundaries, so every countdown
  // changes together.
  clearTimeout(S.tick);
  const wait = 1000 - (clock.now() % 1000) + 5;
  // A named function: the browser tests time the tick by this name.
  S.tick = setTimeout(function countdownTick() {
    holders.tickHolders();
    tickPools();
    scheduleTick();
  }, wait);
}

function startDashboard(signIn) {
  S.signIn = signIn;
  setCsrf(signIn.csrf_token);
  setText($('[data-role]'), signIn.role);
  $('.who').hidden = false;
  $('[data-action="logout"]').hidden = false;
  $('[data-action="pause"]').hidden = false;
  $('#login').hidden = true;
  $('#dash').hidden = false;
  document.body.classList.toggle('viewer', !isAdmin());
  holders.clearHolders();
  applyView();
  refreshAll();
  S.feed = new EventFeed($('[data-events]'), { onEvent, onState: showConnection });
  S.feed.start().catch(() => S.feed.open());
  showConnection();
  scheduleTick();
  clearInterval(S.poll);
  S.poll = setInterval(pollHolders, POLL_MS);
  if (!S.webhooks) S.webhooks = new WebhooksPanel($('#webhooks'), isAdmin);
  S.webhooks.setPaused(S.paused);
  S.webhooks.start(POLL_MS);
  table().focus({ preventScroll: true });
}

function stopDashboard() {
  if (S.feed) S.feed.close();
  S.feed = null;
  S.signIn = null;
  setCsrf('');
  clearTimeout(S.tick);
  clearInterval(S.poll);
  S.poll = null;
  clearInterval(S.retry);
  S.retry = null;
  holders.clearHolders();
  clearPools();
  if (S.webhooks) S.webhooks.clear();
  showHistory('', '');
  $('[data-events]').replaceChildren();
  $('#dash').hidden = true;
  $('.who').hidden = true;
  setText($('[data-role]'), '');
  $('[data-action="logout"]').hidden = true;
  $('[data-action="pause"]').hidden = true;
  showConnection();
}

function signedOut(message) {
  stopDashboard();
  showLogin(startDashboard, message);
}

async function logout() {
  try {
    await request('POST', '/ui/logout');
  } catch {
    // Signed out locally either way; the cookie dies with the sign-in.
  }
  signedOut('');
}

function togglePause() {
  S.paused = !S.paused;
  const b = $('[data-action="pause"]');
  b.setAttribute('aria-pressed', String(S.paused));
  setText(b, S.paused ? '▶ Resume live updates' : '‖ Pause live updates');
  document.body.classList.toggle('paused', S.paused);
  if (S.feed) S.feed.setPaused(S.paused);
  if (S.webhooks) S.webhooks.setPaused(S.paused);
  if (!S.paused) refreshAll();
}

// ---- wiring --------------------------------------------------------------

function wire() {
  initTheme($('[data-action="theme"]'));
  $('[data-action="help"]').addEventListener('click', openHelp);
  $('[data-action="logout"]').addEventListener('click', logout);
  $('[data-action="pause"]').addEventListener('click', togglePause);
  $('[data-action="all-pools"]').addEventListener('click', () => changeView({ pool: '' }));
  $('[data-action="first"]').addEventListener('click', () => page(0));
  $('[data-action="prev"]').addEventListener('click', () => page(-1));
  $('[data-action="next"]').addEventListener('click', () => page(1));
  $('[data-action="more-sessions"]').addEventListener('click', () => moreSessions().catch(() => {}));
  $('#history-range').addEventListener('change', (e) => changeView({ range: e.target.value }));
  for (const th of $$('#holders th[data-sort]')) {
    th.querySelector('button').addEventListener('click', () => sortBy(th.dataset.sort));
  }
  const filter = $('#filter');
  const typed = debounce(() => {
    if (filter.value !== S.view.q) changeView({ q: filter.value }, { burst: true });
  }, 250);
  filter.addEventListener('input', typed);
  filter.addEventListener('blur', endBurst);
  filter.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === 'Escape') {
      e.preventDefault();
      endBurst();
      table().focus();
    }
  });
  table().addEventListener('focus', () => {
    if (!S.selected) move(0);
  });
  bindKeys(table(), {
    move,
    page,
    filter: () => filter.focus(),
    revoke: () => S.selected && revokeSeat(S.selected),
  });
  initRevoke({ afterRevoke: () => refreshAll() });
  window.addEventListener('popstate', () => {
    S.view = readUrl();
    applyView();
    refreshAll();
  });
  link.listen(onLink);
  whenUnauthorized(() => {
    if (S.signIn) signedOut('Your sign-in has ended. Sign in again.');
  });
}

async function boot() {
  wire();
  let signIn;
  try {
    signIn = await fetchSignIn();
  } catch {
    showConnection();
    setTimeout(boot2, 2000);
    return;
  }
  if (signIn) startDashboard(signIn);
  else showLogin(startDashboard);
}

// A retry of the first sign-in check, without wiring twice.
async function boot2() {
  try {
    const signIn = await fetchSignIn();
    if (signIn) startDashboard(signIn);
    else showLogin(startDashboard);
  } catch {
    setTimeout(boot2, 2000);
  }
}

boot();
