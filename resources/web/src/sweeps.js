// The sweeps (issue 37): #/sweeps lists every sweep (GET /api/v1/sweeps, newest first) with its
// status and how many of its members have ended, each linking to its page; #/sweeps/ID is that
// page (sweep.js). The list re-reads on the stream's run news and every few seconds while a
// sweep is running.

import { getJson, onStream } from './api.js';
import { el, table, time, statusBadge, errorBox } from './dom.js';
import * as sweep from './sweep.js';

const POLL_MS = 3000;

export function mount(root, route) {
  if (route.path[1] !== undefined) return sweep.mount(root, route);
  const body = el('div', { id: 'sweeps-table' });
  root.append(el('h1', {}, 'Sweeps'),
    el('p', { class: 'muted' }, 'Runs started together over a grid or random draws of spec fields: ',
      el('code', {}, 'ringmaster sweep SPEC --axis FIELD=V1,V2'), '. ', el('a', { href: '#/runs' }, 'All runs')),
    body);
  let controller = null;
  let poll = null;

  async function load() {
    if (controller) controller.abort();
    controller = new AbortController();
    clearTimeout(poll);
    try {
      const { sweeps } = await getJson('sweeps', {}, controller.signal);
      body.replaceChildren(sweeps.length === 0 ? el('p', { class: 'muted' }, 'No sweep yet.') : table([
        { title: 'ID', class: 'num', value: (s) => el('a', { href: `#/sweeps/${s.id}` }, s.id) },
        { title: 'Name', value: (s) => el('a', { href: `#/sweeps/${s.id}` }, s.name) },
        { title: 'Status', value: (s) => statusBadge(s.status) },
        { title: 'Members ended', class: 'num', value: (s) => `${s.ended} / ${s.members}` },
        { title: 'Created', value: (s) => time(s.created_at) },
        { title: 'Ended', value: (s) => time(s.ended_at) },
      ], sweeps, (s) => ({ 'data-sweep': s.id, class: `sweep-row status-row-${s.status}` })));
      if (sweeps.some((s) => s.status === 'running')) poll = setTimeout(load, POLL_MS);
    } catch (error) {
      if (error.name !== 'AbortError') body.replaceChildren(errorBox(error));
    }
  }

  load();
  const unsubscribe = onStream('runs', () => load());
  const unsubscribeReconnected = onStream('reconnected', () => load());
  return () => {
    unsubscribe();
    unsubscribeReconnected();
    clearTimeout(poll);
    if (controller) controller.abort();
  };
}
