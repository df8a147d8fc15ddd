// A pool's history: usage over a range (`GET /v1/admin/usage`) as a chart
// and a summary (denials split by what they say about the seat count), the
// what-if curve of the same range (what_if.js), its sessions
// (`GET /v1/admin/sessions`, newest first, paged) and a CSV export of them. A server without history (404, or the API not
// there yet) shows "No history yet." instead.

import { getJson, withQuery, HttpError } from './api.js';
import { $, el, setText } from './dom.js';
import { coveredStart, fmtDateTime, fmtDuration, utcTitle, shortId, fmtCount } from './format.js';
import { drawUsage } from './chart.js';
import { refusalItems, showWhatIf } from './what_if.js';

/** Range → [length ms, bucket]: about 60–100 buckets each. */
const RANGES = {
  '1h': [3600e3, '1m'],
  '24h': [86400e3, '15m'],
  '7d': [7 * 86400e3, '2h'],
  '30d': [30 * 86400e3, '8h'],
};
const SESSIONS_PAGE = 50;

let shown = { pool: '', range: '' };
let nextCursor = null;
let loading = false;

function rangeOf(range, now) {
  const [len, step] = RANGES[range] || RANGES['24h'];
  return { from: new Date(now - len).toISOString(), to: new Date(now).toISOString(), step };
}

function noHistory(text) {
  const none = $('#history-none');
  setText(none, text);
  none.hidden = false;
  $('#history-body').hidden = true;
}

/** Show `pool`'s history for `range` (hide the section when pool is ''). */
export async function showHistory(pool, range, { refresh = false, background = false } = {}) {
  const section = $('#history');
  section.hidden = !pool;
  if (!pool) {
    shown = { pool: '', range: '' };
    return;
  }
  if (!refresh && shown.pool === pool && shown.range === range) return;
  shown = { pool, range };
  setText($('#history-pool'), pool);
  $('#history-range').value = RANGES[range] ? range : '24h';
  if (loading) return;
  loading = true;
  try {
    const { from, to, step } = rangeOf(range, Date.now());
    $('#history-csv').href = withQuery('/v1/admin/sessions', { license: pool, from, to, format: 'csv' });
    $('#history-csv').setAttribute('download', `leasehold-${pool}-sessions.csv`);
    const usage = await getJson(withQuery('/v1/admin/usage', { license: pool, from, to, step }), { background });
    if (shown.pool !== pool) return;
    $('#history-none').hidden = true;
    $('#history-body').hidden = false;
    drawUsage($('#history-chart'), usage);
    renderCovered(usage);
    renderSummary(usage.summary);
    // Not awaited: the replay may take a moment on a long range, and its
    // failure must not hide the sessions.
    showWhatIf(pool, from, to, { background, current: () => shown.pool === pool && shown.range === range });
    const sessions = await getJson(withQuery('/v1/admin/sessions', { license: pool, from, to, limit: SESSIONS_PAGE }), {
      background,
    });
    if (shown.pool !== pool) return;
    renderSessions(sessions, 'replace');
  } catch (e) {
    if (e instanceof HttpError && (e.status === 404 || e.status === 405 || e.status === 501)) {
      noHistory('No history yet.');
    } else if (e instanceof HttpError) {
      noHistory(`No history: ${e.message}`);
    } else {
      noHistory('No history yet (the server is not answering).');
    }
  } finally {
    loading = false;
  }
}

/**
 * Say so when the history starts inside the range: the chart's axis starts
 * there (chart.js), and "the last 24 hours" would otherwise read as a day
 * of idle seats on a server started minutes ago.
 */
function renderCovered(usage) {
  const p = $('#history-covered');
  const start = coveredStart(usage.from, usage.summary.covered_from);
  const to = Date.parse(usage.to);
  p.hidden = start <= Date.parse(usage.from);
  if (p.hidden) return;
  p.dataset.coveredFrom = String(start);
  p.title = utcTitle(start);
  setText(p, start >= to
    ? 'Nothing recorded in this range yet.'
    : `History starts at ${fmtDateTime(start)} (${fmtDuration(to - start)} of this range): nothing was recorded before.`);
}

function renderSummary(s) {
  const dl = $('#history-summary');
  const item = (label, value, title, figure) =>
    [el('dt', {}, label), el('dd', { title, 'data-figure': figure }, value)];
  const peakAt = s.peak_at ? Date.parse(s.peak_at) : null;
  dl.replaceChildren(
    ...item('Peak', `${fmtCount(s.peak)} of ${fmtCount(s.seats)}`, peakAt ? `first at ${fmtDateTime(peakAt)} · ${utcTitle(peakAt)}` : null),
    ...item('Utilization', `${(s.utilization * 100).toFixed(1)} %`),
    ...item('Seat-hours', s.seat_hours.toFixed(1)),
    ...item('Idle seat-hours', (s.idle_hours ?? 0).toFixed(1), 'Seat-hours inside recorded idle periods (of at least 60 s)'),
    ...item('Time full', fmtDuration(s.full_s * 1000)),
    ...item('Denials', fmtCount(s.denials), 'Every counted refusal', 'denials'),
    ...refusalItems(s).flatMap(([label, value, title, figure]) => item(label, value, title, figure)),
    ...item('Holders', fmtCount(s.holders)),
  );
}

const END_TEXT = { release: '− release', revoke: '✗ revoke', lapse: '† lapse', idle: 'z idle' };

function sessionRow(s) {
  const started = Date.parse(s.started_at);
  const ended = s.ended_at ? Date.parse(s.ended_at) : null;
  return el(
    'tr',
    { 'data-session-seat': s.seat_id },
    el('td', {}, s.holder),
    el('td', { class: 'mono' }, s.fingerprint ?? '—'),
    el('td', { class: 'mono', title: s.seat_id }, shortId(s.seat_id)),
    el('td', { title: utcTitle(started) }, fmtDateTime(started)),
    el('td', ended ? { title: utcTitle(ended) } : {}, ended ? fmtDateTime(ended) : '—'),
    el('td', { class: 'num' }, fmtDuration(s.duration_s * 1000)),
    el('td', {}, s.end ? END_TEXT[s.end] || s.end : '● open'),
  );
}

function renderSessions(resp, mode) {
  const tbody = $('#sessions tbody');
  const rows = resp.sessions.map(sessionRow);
  if (mode === 'replace') tbody.replaceChildren(...rows);
  else tbody.append(...rows);
  nextCursor = resp.next;
  $('[data-action="more-sessions"]').hidden = !nextCursor;
}

/** The "More sessions" button: the next page, appended. */
export async function moreSessions() {
  if (!nextCursor || !shown.pool) return;
  const { from, to } = rangeOf(shown.range, Date.now());
  const resp = await getJson(
    withQuery('/v1/admin/sessions', { license: shown.pool, from, to, limit: SESSIONS_PAGE, after: nextCursor }),
  );
  renderSessions(resp, 'append');
}
