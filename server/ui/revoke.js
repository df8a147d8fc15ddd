// The revoke dialog: it names holder, license and seat; nothing is sent
// before "Revoke" is pressed; Esc or Cancel closes it; focus goes back to
// the holders table afterwards. For a borrowed seat it says why a plain
// revoke is refused and offers "Force revoke" ({"force": true}); so does a
// plain revoke the server refuses with 409 `borrowed` (the seat may have
// been borrowed after the table was drawn).

import { request, HttpError } from './api.js';
import { $, setText } from './dom.js';
import { fmtDateTime, parseDuration, utcTitle } from './format.js';

const dialog = () => $('#revoke-dialog');

let current = null;
let returnTo = null;
let onDone = () => {};

export function initRevoke({ afterRevoke }) {
  onDone = afterRevoke;
  const d = dialog();
  const form = $('#revoke-form');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    confirmRevoke(e.submitter && e.submitter.value === 'force');
  });
  $('[data-action="cancel"]', d).addEventListener('click', () => d.close('cancel'));
  // Esc closes a modal <dialog> by itself; both ways end here.
  d.addEventListener('close', () => {
    current = null;
    if (returnTo && returnTo.isConnected) returnTo.focus();
    returnTo = null;
  });
}

/** Open the dialog for `seat`; `focusBack`: where focus goes when it closes. */
export function openRevoke(seat, focusBack) {
  const d = dialog();
  current = seat;
  returnTo = focusBack;
  setText($('[data-field="holder"]', d), seat.holder + (seat.fingerprint ? ` (${seat.fingerprint})` : ''));
  setText($('[data-field="license"]', d), seat.license_id);
  setText($('[data-field="seat"]', d), seat.seat_id);
  $('#revoke-reason').value = '';
  $('#revoke-block').value = '';
  showBorrowed(seat.state === 'borrowed' ? borrowedText(seat) : '');
  showError('');
  setBusy(false);
  d.showModal();
  $('#revoke-reason').focus();
}

/** Why force is needed for a borrowed seat, with when it comes back. */
function borrowedText(seat) {
  const until = Date.parse(seat.expires_at);
  return `Borrowed until ${fmtDateTime(until)} (${utcTitle(until)}): its holder's token stays ` +
    'valid offline until then, so freeing the seat now can put one seat more in use than ' +
    'sold until it expires. A plain revoke is refused; "Force revoke" frees it anyway.';
}

/** The borrowed explanation and the force button, or neither (`text` empty). */
function showBorrowed(text) {
  const p = $('#revoke-borrowed');
  setText(p, text);
  p.hidden = !text;
  $('[data-action="force-revoke"]', dialog()).hidden = !text;
}

function showError(text) {
  const p = $('#revoke-error');
  setText(p, text);
  p.hidden = !text;
}

function setBusy(busy) {
  for (const b of dialog().querySelectorAll('button')) b.disabled = busy;
}

async function confirmRevoke(force) {
  if (!current) return;
  const seat = current;
  let block;
  try {
    block = parseDuration($('#revoke-block').value);
  } catch (e) {
    showError(e.message);
    $('#revoke-block').focus();
    return;
  }
  const reason = $('#revoke-reason').value.trim();
  const body = {};
  if (reason) body.reason = reason;
  if (block) body.block_s = block;
  if (force) body.force = true;
  setBusy(true);
  try {
    await request('DELETE', `/v1/admin/seats/${encodeURIComponent(seat.seat_id)}`, { body });
  } catch (e) {
    setBusy(false);
    if (e instanceof HttpError && e.status === 409 && e.code === 'borrowed') {
      // The server's sentence says until when; force is offered from now on.
      showBorrowed(e.message);
      showError('Not revoked: the seat is borrowed.');
    } else if (e instanceof HttpError && e.status === 404) {
      showError('This seat is no longer held (released, revoked or reaped meanwhile).');
    } else if (e instanceof HttpError && e.status === 403) {
      showError(`Refused: ${e.message}`);
    } else {
      showError(`Could not revoke: ${e.message}`);
    }
    return;
  }
  dialog().close('revoked');
  onDone(seat);
}
