// What the page shows lives in the URL (`?pool=…&q=…&sort=…&order=…`), so a
// view can be shared and the back button returns to the previous one.
// Changes push a history entry; typing in the filter replaces the entry it
// pushed at the start of the burst, so one search is one step back.

const SORTS = ['license', 'holder', 'expires_at', 'checked_out_at'];
export const DEFAULT_SORT = 'expires_at';

/** The view in the current URL, with defaults filled in. */
export function readUrl() {
  const p = new URLSearchParams(location.search);
  const sort = SORTS.includes(p.get('sort')) ? p.get('sort') : DEFAULT_SORT;
  const order = p.get('order') === 'desc' ? 'desc' : 'asc';
  return {
    pool: p.get('pool') || '',
    q: p.get('q') || '',
    sort,
    order,
    range: p.get('range') || '24h',
  };
}

function toSearch(view) {
  const p = new URLSearchParams();
  if (view.pool) p.set('pool', view.pool);
  if (view.q) p.set('q', view.q);
  if (view.sort !== DEFAULT_SORT || view.order !== 'asc') {
    p.set('sort', view.sort);
    p.set('order', view.order);
  }
  if (view.range && view.range !== '24h') p.set('range', view.range);
  const s = p.toString();
  return s ? `?${s}` : location.pathname;
}

let typing = false;

/**
 * Record `view` in the history. `replace`: amend the current entry (a
 * burst of keystrokes in the filter after its first one).
 */
export function writeUrl(view, { burst = false } = {}) {
  const url = toSearch(view);
  if (url === location.search || (url === location.pathname && !location.search)) return;
  if (burst && typing) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  typing = burst;
}

/** The filter burst ended (blur, Enter): the next change pushes again. */
export function endBurst() {
  typing = false;
}
