// The usage chart as inline SVG built with DOM calls: a bar per bucket for
// the peak seats in use, a step line for the pool size, a mark above each
// bucket with denials. No library, no inline style (the CSP forbids it):
// colours come from classes in app.css, sizes from SVG attributes.
//
// The time axis runs from where the history starts (`covered_from`), not
// from the range's `from`: a server started 15 minutes ago has nothing to
// say about the 23h45m before, and drawing them as an empty axis squeezes
// its one bucket into a sliver at the right edge.

import { svg } from './dom.js';
import { coveredStart, fmtCount, fmtDateTime, fmtTime, utcTitle } from './format.js';

const W = 720;
const H = 200;
const PAD = { left: 36, right: 8, top: 14, bottom: 22 };

/** Draw `usage` (a UsageResponse) into `host`, replacing what was there. */
export function drawUsage(host, usage) {
  const from = coveredStart(usage.from, usage.summary.covered_from);
  const to = Date.parse(usage.to);
  // Buckets wholly before the history starts are not drawn (nothing was
  // recorded there); the one it starts in is drawn from that instant.
  const stepMs = usage.step_s * 1000;
  const pts = usage.points.filter((p) => Math.min(to, Date.parse(p.t) + stepMs) > from);
  const span = Math.max(1, to - from);
  const top = Math.max(1, ...pts.map((p) => Math.max(p.peak, p.seats)));
  const x = (t) => PAD.left + ((t - from) / span) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);

  const root = svg('svg', {
    class: 'usage',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    // The axis's ends in ms, for tests and anyone reading the page.
    'data-axis-from': from,
    'data-axis-to': to,
    'aria-label': `Seats in use for ${usage.license_id}, peak ${fmtCount(usage.summary.peak)} of ${fmtCount(usage.summary.seats)}`,
  });
  // Axes and gridlines: 0, half, top.
  for (const v of [0, Math.round(top / 2), top]) {
    root.append(
      svg('line', { class: 'grid-line', x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      svg('text', { class: 'axis', x: PAD.left - 4, y: y(v) + 4, 'text-anchor': 'end' }, fmtCount(v)),
    );
  }
  root.append(
    svg('text', { class: 'axis', x: PAD.left, y: H - 6 }, fmtDateTime(from)),
    svg('text', { class: 'axis', x: W - PAD.right, y: H - 6, 'text-anchor': 'end' }, fmtDateTime(to)),
  );

  let seatsPath = '';
  for (const [i, p] of pts.entries()) {
    const t0 = Math.max(from, Date.parse(p.t));
    const t1 = Math.min(to, Date.parse(p.t) + stepMs);
    const x0 = x(t0);
    const w = Math.max(1, x(t1) - x0 - 1);
    const full = p.seats > 0 && p.peak >= p.seats;
    const bar = svg(
      'rect',
      { class: full ? 'bar full' : 'bar', x: x0, y: y(p.peak), width: w, height: Math.max(0, y(0) - y(p.peak)) },
      svg('title', {}, `${fmtTime(t0)}–${fmtTime(t1)} (${utcTitle(t0)})\npeak ${fmtCount(p.peak)} of ${fmtCount(p.seats)} seats${full ? ' (full)' : ''}\n${fmtCount(p.checkouts)} checkouts, ${fmtCount(p.denials)} denials`),
    );
    root.append(bar);
    if (p.denials > 0) {
      root.append(svg('path', { class: 'denial', d: `M${x0 + w / 2 - 4},${PAD.top - 10} l8,0 l-4,7 z` },
        svg('title', {}, `${p.denials} denied at ${fmtTime(t0)}`)));
    }
    seatsPath += `${i === 0 ? 'M' : 'L'}${x0},${y(p.seats)} L${x(t1)},${y(p.seats)} `;
  }
  if (seatsPath) root.append(svg('path', { class: 'seats-line', d: seatsPath }));
  host.replaceChildren(root);
}
