// The dashboard's entry point: a hash router that names every view in the URL (so a link can be
// shared: run, tab, ranks and step range), the live badge, and mounting / unmounting views.
// Views are modules exporting mount(root, route) that return an optional unmount function.

import { openStream } from './api.js';
import { el, errorBox } from './dom.js';
import { parseHash } from './route.js';
import { loadFigures } from './figures.js';
import * as runs from './runs.js';
import * as run from './run.js';
import * as pipeline from './pipeline.js';
import * as compare from './compare.js';
import * as sweeps from './sweeps.js';

const views = { runs, run, pipeline, compare, sweeps };
let unmount = null;

function route() {
  const parsed = parseHash();
  const name = parsed.path[0] || 'runs';
  // Views rewrite their own state with history.replaceState, which fires no hashchange: a
  // hashchange is always a navigation (a link, back / forward, an edited URL), so re-mount.
  if (unmount) unmount();
  unmount = null;
  const root = document.getElementById('view');
  root.replaceChildren();
  const view = views[name];
  if (!view) {
    root.append(errorBox(`No page named '${name}'.`), el('a', { href: '#/runs' }, 'Back to the runs'));
    return;
  }
  try {
    unmount = view.mount(root, parsed) || null;
  } catch (error) {
    root.append(errorBox(error));
  }
}

function setLive(state) {
  const badge = document.getElementById('live');
  badge.textContent = state;
  badge.className = `live ${state === 'live' ? 'on' : 'off'}`;
}

window.addEventListener('hashchange', route);
openStream(setLive);
// The table of figures names the numbers on every page; a page drawn without it shows their ids.
loadFigures().catch(() => {}).finally(route);
