// Sign-in: the token is posted once to `POST /ui/login`, which sets an
// HttpOnly sign-in cookie (`leasehold_session`); the page never stores the token itself.
// `GET /ui/session` says who we are (role, CSRF token) or 401.

import { request, HttpError, NetworkError } from './api.js';
import { $, setText } from './dom.js';

/** The current sign-in, or null when signed out. Throws NetworkError. */
export async function fetchSignIn() {
  try {
    return await request('GET', '/ui/session', { quiet401: true });
  } catch (e) {
    if (e instanceof HttpError && (e.status === 401 || e.status === 403)) return null;
    throw e;
  }
}

function showError(text) {
  const p = $('#login-error');
  setText(p, text);
  p.hidden = !text;
}

/** Show the sign-in form; `onSignedIn(signIn)` once a token is accepted. */
export function showLogin(onSignedIn, message = '') {
  $('#login').hidden = false;
  showError(message);
  const form = $('#login-form');
  const input = form.elements.token;
  input.value = '';
  input.focus();
  form.onsubmit = async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) {
      showError('Enter a token.');
      return;
    }
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      await request('POST', '/ui/login', { body: { token }, quiet401: true });
      const signIn = await fetchSignIn();
      if (!signIn) throw new HttpError(401, 'unauthorized', 'the sign-in did not start');
      input.value = '';
      showError('');
      $('#login').hidden = true;
      onSignedIn(signIn);
    } catch (err) {
      if (err instanceof HttpError && (err.status === 401 || err.status === 403)) {
        showError('That token is not valid. Use the admin token or a viewer token.');
      } else if (err instanceof HttpError && err.status === 429) {
        showError('Too many attempts; wait a moment and try again.');
      } else if (err instanceof NetworkError) {
        showError('Cannot reach the server.');
      } else {
        showError(`Sign-in failed: ${err.message}`);
      }
      input.select();
    } finally {
      button.disabled = false;
    }
  };
}
