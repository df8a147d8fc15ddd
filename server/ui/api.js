// HTTP to leaseholdd: JSON in and out, the sign-in cookie (same origin),
// and the CSRF header on every state change. Every outcome of a request
// also tells `link` whether the server is reachable, so the banner reflects
// fetch failures as well as the event stream's.

let csrfToken = '';

/** The sign-in's CSRF token, sent as X-CSRF-Token on non-GET requests. */
export function setCsrf(token) {
  csrfToken = token || '';
}

/** A reply with an error status: `status`, and the API's `code`/`message`. */
export class HttpError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

/** No reply at all: connection refused, reset, DNS, offline. */
export class NetworkError extends Error {}

/**
 * Reachability, as the page sees it: fetches and the event stream report
 * here; the banner and the connection badge listen.
 */
export const link = {
  listeners: new Set(),
  up: true,
  error: '',
  report(up, error = '') {
    const changed = up !== this.up || (!up && error !== this.error);
    this.up = up;
    this.error = error;
    if (changed) for (const f of this.listeners) f(up, error);
  },
  listen(f) {
    this.listeners.add(f);
  },
};

/** Called on any 401 from an admin route: the sign-in ended. */
let onUnauthorized = () => {};
export function whenUnauthorized(f) {
  onUnauthorized = f;
}

/** Options of a request the page makes by itself, not for a person. */
export const BACKGROUND = Object.freeze({ background: true });

/**
 * `fetch` with the page's rules. Resolves to the parsed JSON (or null for
 * an empty body, or the text for non-JSON bodies); rejects with HttpError
 * or NetworkError. `background`: the page refreshes by itself (a stream
 * event, a retry); the header tells the server it is no person's use, so
 * an abandoned tab still reaches the idle timeout.
 */
export async function request(method, path, { body, quiet401 = false, background = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (background) headers['X-Leasehold-Background'] = '1';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    link.report(false, 'cannot reach the server');
    throw new NetworkError(String(e && e.message ? e.message : e));
  }
  // A 5xx from a proxy or a 503 from a store outage means "down" too.
  if (resp.status >= 502 && resp.status <= 504) {
    link.report(false, `the server answers ${resp.status}`);
  } else {
    link.report(true);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!resp.ok) {
    if (resp.status === 401 && !quiet401) onUnauthorized();
    const err = data && typeof data === 'object' ? data : {};
    throw new HttpError(resp.status, err.error, err.message);
  }
  return data;
}

export const getJson = (path, opts) => request('GET', path, opts);

/** `path` with the query parameters that are set (skips '', null, undefined). */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}
