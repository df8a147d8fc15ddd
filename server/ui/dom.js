// Small DOM helpers. Text from the server only ever reaches the page
// through `textContent` (here: `el`'s string children and `setText`), never
// as markup, so a holder named `<img onerror=…>` is just text.

/**
 * `el('td', {class: 'num', title: 't'}, 'text', child)`: an element with
 * attributes (null/undefined/false skipped) and children (strings become
 * text nodes).
 */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

/** Set text only if it changed: no DOM write, no layout work, when equal. */
export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** Set (or remove, for null) an attribute only if it changed. */
export function setAttr(node, name, value) {
  if (value === null || value === undefined) {
    if (node.hasAttribute(name)) node.removeAttribute(name);
  } else if (node.getAttribute(name) !== String(value)) {
    node.setAttribute(name, String(value));
  }
}

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element; attributes are presentation attributes, not `style`. */
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

/** Run `f` at most once per `ms`, trailing: bursts collapse into one call. */
export function debounce(f, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => f(...args), ms);
  };
}

/**
 * Like debounce, but a steady stream of calls still runs `f` every `max`
 * ms: a pool with constant checkouts keeps updating.
 */
export function throttle(f, wait, max) {
  let timer = null;
  let first = 0;
  const fire = () => {
    timer = null;
    first = 0;
    f();
  };
  return () => {
    const now = performance.now();
    if (!first) first = now;
    clearTimeout(timer);
    timer = setTimeout(fire, Math.max(0, Math.min(wait, first + max - now)));
  };
}
