// The runs list: every recorded run with its status and figures, filtered by status, strategy and
// name (the history filters, kept in the URL), refreshed whenever the stream says the list changed.
// Runs can be ticked and compared, and coloured by a spec field ("colour by": runs with the same
// value share a colour, with a legend counting each group's runs).

import { getJson, onStream } from './api.js';
import { el, table, num, duration, time, errorBox, finalLossCell } from './dom.js';
import { replaceParams } from './route.js';
import { colourSwatch, groupColours, legendBox } from './scatter.js';
import { tagCells } from './organise.js';
import { runStatusCell } from './scheduler.js';

const STRATEGIES = ['', 'single', 'ddp', 'fsdp', 'pipeline'];
const STATUSES = ['', 'pending', 'running', 'completed', 'failed', 'cancelled', 'interrupted'];

export function mount(root, route) {
  const filters = {
    status: route.params.get('status') || '',
    strategy: route.params.get('strategy') || '',
    name: route.params.get('name') || '',
    colour_by: route.params.get('colour_by') || '',
    q: route.params.get('q') || '',
  };
  const selected = new Set();
  const status = el('select', { id: 'filter-status', onchange: () => { filters.status = status.value; changed(); } },
    STATUSES.map((s) => el('option', { value: s }, s || 'any status')));
  status.value = filters.status;
  const strategy = el('select', { id: 'filter-strategy', onchange: () => { filters.strategy = strategy.value; changed(); } },
    STRATEGIES.map((s) => el('option', { value: s }, s || 'any strategy')));
  strategy.value = filters.strategy;
  const name = el('input', { id: 'filter-name', placeholder: 'name contains', value: filters.name,
    oninput: () => { filters.name = name.value.trim(); changedSoon(); } });
  const colourBy = el('select', { id: 'colour-by', onchange: () => { filters.colour_by = colourBy.value; changed(); } },
    el('option', { value: '' }, 'colour by: nothing'));
  // The search line (issue 33): words in the name, a tag or the note, and terms such as tag:T,
  // since:7d or optimizer.lr=3e-4, read by the server as `ringmaster runs --search` reads them.
  const search = el('input', { id: 'filter-q', class: 'search', value: filters.q,
    placeholder: 'search: words, tag:T, note:T, since:7d, optimizer.lr=3e-4',
    title: 'words in the name, a tag or the note; tag:T note:TEXT status:S strategy:S since:DATE until:DATE field=value',
    oninput: () => { filters.q = search.value.trim(); changedSoon(); } });
  const compareLink = el('a', { class: 'button disabled', href: '#/compare' }, 'Compare selected');
  const sweepsLink = el('a', { class: 'button', href: '#/sweeps', id: 'sweeps-link' }, 'Sweeps');
  const count = el('span', { class: 'muted' });
  const legend = el('div', {});
  const body = el('div', { id: 'runs-table' });
  root.append(el('h1', {}, 'Runs'), el('div', { class: 'toolbar' }, search, status, strategy, name, colourBy, compareLink, sweepsLink, count), legend, body);

  // The colour-by choices: every spec field of the listed runs (those that differ first).
  function updateColourBy(fields) {
    const wanted = filters.colour_by;
    colourBy.replaceChildren(el('option', { value: '' }, 'colour by: nothing'), ...fields.map((f) => el('option', { value: f }, `colour by ${f}`)));
    colourBy.value = fields.includes(wanted) ? wanted : '';
  }

  let controller = null;
  let timer = null;

  function updateCompareLink() {
    const ids = [...selected].sort((a, b) => a - b);
    compareLink.href = `#/compare?runs=${ids.join(',')}`;
    compareLink.className = ids.length >= 2 ? 'button' : 'button disabled';
  }

  async function load() {
    if (controller) controller.abort();
    controller = new AbortController();
    try {
      const listed = await getJson('runs', filters, controller.signal).catch((error) => {
        // A field no listed run has any more (the filters changed): list them uncoloured.
        if (error.status !== 400 || !filters.colour_by) throw error;
        filters.colour_by = '';
        return getJson('runs', filters, controller.signal);
      });
      const { runs } = listed;
      updateColourBy(listed.spec_fields || []);
      const by = filters.colour_by && listed.groups
        ? { key: filters.colour_by, categories: listed.groups, groups: runs.map((r) => (r.group ?? null)) } : null;
      const colours = groupColours(runs.map((r) => r.id), by);
      const colourOfRun = new Map(runs.map((r, i) => [r.id, colours.colourOf(i)]));
      legend.replaceChildren(by ? legendBox('runs-legend', colours.legend) : '');
      count.textContent = `${runs.length} run${runs.length === 1 ? '' : 's'}`;
      body.replaceChildren(table([
        ...(by ? [{ title: by.key, value: (r) => el('span', { class: 'group', 'data-group': r.group ?? 'none' },
          colourSwatch(colourOfRun.get(r.id)), r.group === null || r.group === undefined ? '–' : by.categories[r.group]) }] : []),
        { title: '', value: (r) => el('input', { type: 'checkbox', checked: selected.has(r.id),
          onchange: (e) => { if (e.target.checked) selected.add(r.id); else selected.delete(r.id); updateCompareLink(); } }) },
        { title: 'ID', class: 'num', value: (r) => el('a', { href: `#/run/${r.id}` }, r.id) },
        { title: 'Name', value: (r) => el('a', { href: `#/run/${r.id}` }, r.name) },
        { title: 'Tags', class: 'tags', value: (r) => tagCells(r.tags) },
        { title: 'Strategy', value: (r) => r.strategy },
        { title: 'Status', value: (r) => runStatusCell(r) },
        { title: 'Ranks', class: 'num', value: (r) => num(r.world_size) },
        { title: 'Created', value: (r) => time(r.created_at) },
        { title: 'Duration', class: 'num', value: (r) => duration(r.duration_s) },
        { title: 'Steps', class: 'num', value: (r) => num(r.final_step) },
        { title: 'Final loss', class: 'num', value: (r) => finalLossCell(r.status, r.final_loss) },
        { title: 'Error', class: 'error-text', value: (r) => r.error || '' },
        // Issue 37: a run started for a sweep links to the sweep's page.
        ...(runs.some((r) => r.sweep) ? [{ title: 'Sweep', value: sweepCell }] : []),
      ], runs, (r) => ({ 'data-run': r.id, class: `run-row status-row-${r.status}` })));
    } catch (error) {
      if (error.name !== 'AbortError') body.replaceChildren(errorBox(error));
    }
  }

  function changed() {
    replaceParams(new URLSearchParams(filters));
    load();
  }
  function changedSoon() {
    clearTimeout(timer);
    timer = setTimeout(changed, 250);
  }

  const unsubscribe = onStream('runs', () => load());
  const unsubscribeReconnected = onStream('reconnected', () => load());
  // A run's new steps change its figures (steps, final loss) though the list itself did not.
  let pending = null;
  const unsubscribeRun = onStream('run', () => {
    if (!pending) pending = setTimeout(() => { pending = null; load(); }, 1000);
  });
  load();
  return () => {
    unsubscribe();
    unsubscribeReconnected();
    unsubscribeRun();
    clearTimeout(timer);
    clearTimeout(pending);
    if (controller) controller.abort();
  };
}

// A sweep member's link to its sweep: "sweep 3 · #2" (the member's position); '' for other runs.
function sweepCell(run) {
  if (!run.sweep) return '';
  return el('a', { class: 'sweep-link', href: `#/sweeps/${run.sweep.id}` }, `sweep ${run.sweep.id} · #${run.sweep.position}`);
}
