// The console's keys, on the web: while the holders table has the focus,
// `j`/`k` (or arrows) move, `n`/`p` page, `/` filters, `r` revokes, `?`
// helps. Outside text fields `?` opens the help anywhere. Everything else is
// plain Tab / Enter / Esc on buttons and native <dialog>s.

import { $ } from './dom.js';

function typing(target) {
  return target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement
    || target instanceof HTMLSelectElement || (target && target.isContentEditable);
}

let helpReturn = null;

export function openHelp() {
  const d = $('#help-dialog');
  if (d.open) return;
  helpReturn = document.activeElement;
  d.showModal();
  d.querySelector('button').focus();
}

/**
 * `table`: the holders table. Handlers: `move(delta)`, `page(delta)`,
 * `filter()`, `revoke()`.
 */
export function bindKeys(table, { move, page, filter, revoke }) {
  $('#help-dialog').addEventListener('close', () => {
    if (helpReturn && helpReturn.isConnected) helpReturn.focus();
    helpReturn = null;
  });
  table.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.target !== table) return;
    const actions = {
      j: () => move(1),
      ArrowDown: () => move(1),
      k: () => move(-1),
      ArrowUp: () => move(-1),
      Home: () => move(-Infinity),
      End: () => move(Infinity),
      n: () => page(1),
      PageDown: () => page(1),
      p: () => page(-1),
      PageUp: () => page(-1),
      '/': () => filter(),
      r: () => revoke(),
    };
    const act = actions[e.key];
    if (act) {
      e.preventDefault();
      act();
    }
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === '?' && !typing(e.target) && !document.querySelector('dialog[open]')) {
      e.preventDefault();
      openHelp();
    }
  });
}
