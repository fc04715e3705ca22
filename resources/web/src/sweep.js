// A sweep's page (issue 37, #/sweeps/ID?by=FIGURE&x=KEY&y=KEY), from GET /api/v1/sweeps/ID
// (storage/query/sweep_report.h): its members in a table (each swept field's value, state, run,
// status, error and figures), the best run by the "rank by" figure with what its spec sets
// differently from the others', the parallel-coordinates chart of the swept fields and that figure,
// and the scatter of any figure against any axis (scatter.js, the compare page's). Live while the
// sweep runs: re-read on the stream's news of its runs, and every few seconds while it is running
// (a member refused or the sweep ending is no run's news).

import { getJson, onStream } from './api.js';
import { el, table, time, statusBadge, errorBox, finalLossCell } from './dom.js';
import { replaceParams } from './route.js';
import { figureColumn, figureLabel, formatFigure } from './figures.js';
import { axisTitle, drawScatter, valueText } from './scatter.js';
import { drawParallelCoordinates } from './parallel_coords.js';

const POLL_MS = 3000;
// The figures the members' table shows after the ranking one, where any member has them.
const TABLE_FIGURES = ['final_loss', 'final_step', 'samples_per_second', 'tokens_per_second', 'mean_step_ms',
  'comm_share', 'bubble_fraction', 'peak_memory', 'duration_s'];

export function mount(root, route) {
  const id = Number(route.path[1]);
  const view = { by: route.params.get('by') || '', x: route.params.get('x') || '', y: route.params.get('y') || '' };
  const heading = el('h1', {}, `Sweep ${route.path[1]}`);
  const content = el('div', {});
  root.append(el('p', {}, el('a', { href: '#/sweeps' }, '← Sweeps')), heading, content);
  if (!Number.isInteger(id) || id < 1) {
    content.replaceChildren(errorBox(`No sweep '${route.path[1]}'.`));
    return null;
  }
  // The pickers stay in place across the refreshes of a running sweep (one left open stays open);
  // the parts between them are drawn anew from each report.
  const rankBy = el('select', { id: 'sweep-rank-by', onchange: () => { view.by = rankBy.value; saveUrl(); load(); } });
  const xPicker = el('select', { id: 'sweep-x', onchange: () => { view.x = xPicker.value; saveUrl(); drawScatterBox(); } });
  const yPicker = el('select', { id: 'sweep-y', onchange: () => { view.y = yPicker.value; saveUrl(); drawScatterBox(); } });
  const summary = el('p', { class: 'muted', id: 'sweep-summary' });
  const best = el('div', {});
  const members = el('div', {});
  const chart = el('div', {});
  const scatterBox = el('div', { class: 'scatter-box', id: 'sweep-scatter' });
  const scatterSection = el('div', { hidden: true }, el('h2', {}, 'Runs on two axes'),
    el('div', { class: 'toolbar' }, el('label', {}, 'X ', xPicker), el('label', {}, 'Y ', yPicker)), scatterBox);
  let shown = null;  // the report drawn, and the runs' colours in it
  let controller = null;
  let poll = null;
  let pending = null;
  let runIds = new Set();

  async function load() {
    if (controller) controller.abort();
    controller = new AbortController();
    clearTimeout(poll);
    try {
      const report = await getJson(`sweeps/${id}`, { by: view.by }, controller.signal);
      runIds = new Set(report.runs);
      draw(report);
      if (report.sweep.status === 'running') poll = setTimeout(load, POLL_MS);
    } catch (error) {
      if (error.name !== 'AbortError') content.replaceChildren(errorBox(error));
    }
  }

  function saveUrl() {
    replaceParams(new URLSearchParams(view));
  }

  function draw(report) {
    const { sweep } = report;
    if (!view.by) view.by = report.best ? report.best.figure : 'final_loss';
    heading.replaceChildren(`Sweep ${sweep.id}: ${sweep.name} `, statusBadge(sweep.status));
    summary.textContent = `${sweep.ended} of ${sweep.members} members ended · ${planMethod(sweep.plan)} over ${sweep.fields.join(', ')}`
      + ` · ${sweep.parallel} at once · from ${sweep.spec_path} · created ${time(sweep.created_at)}`
      + (sweep.ended_at ? ` · ended ${time(sweep.ended_at)}` : '');
    // Every run figure the report has an axis for; choosing one asks the server for its best run.
    const figures = report.axes.filter((a) => a.figure).map((a) => a.key);
    setOptions(rankBy, [{ keys: figures.includes(view.by) ? figures : [view.by, ...figures], text: figureLabel }], view.by);
    best.replaceChildren(bestPanel(report));
    members.replaceChildren(membersTable(report));
    drawCharts(report);
    if (!content.contains(summary)) {
      content.replaceChildren(summary, el('div', { class: 'toolbar' }, el('label', {}, 'Rank by ', rankBy)), best, members, chart,
        scatterSection);
    }
  }

  function drawCharts(report) {
    const fields = report.sweep.fields.map((key) => report.axes.find((a) => a.key === key)).filter(Boolean);
    const figureAxis = report.axes.find((a) => a.key === view.by);
    scatterSection.hidden = !figureAxis || report.runs.length === 0;
    if (scatterSection.hidden) {
      chart.replaceChildren(el('p', { class: 'muted', id: 'sweep-no-runs' }, 'No member has a run yet: the charts come with the first.'));
      return;
    }
    const positions = report.runs.map((run) => report.members.find((m) => m.run === run)?.position ?? '?');
    const pcBox = el('div', { class: 'pc-box', id: 'sweep-pc' });
    const colours = drawParallelCoordinates(pcBox, { fields, figureAxis, runIds: report.runs, positions,
      bestRun: report.best?.run ?? null, higherIsBetter: report.best?.higher_is_better ?? false });
    chart.replaceChildren(el('h2', {}, `The swept fields and ${figureLabel(view.by).toLowerCase()}`), pcBox);
    // The scatter: any figure against any axis, the runs coloured as in the parallel coordinates.
    const keys = (figure) => report.axes.filter((a) => a.figure === figure).map((a) => a.key);
    if (!keys(false).includes(view.x) && !keys(true).includes(view.x)) view.x = report.sweep.fields[0] ?? 'final_step';
    if (!keys(false).includes(view.y) && !keys(true).includes(view.y)) view.y = view.by;
    const groups = [{ label: 'Swept fields', keys: keys(false), text: (k) => k }, { label: 'Figures', keys: keys(true), text: figureLabel }];
    setOptions(xPicker, groups, view.x);
    setOptions(yPicker, groups, view.y);
    shown = { report, colours };
    drawScatterBox();
  }

  function drawScatterBox() {
    const { report, colours } = shown;
    const axes = Object.fromEntries(report.axes.map((a) => [a.key, a]));
    const empty = [axes[view.x], axes[view.y]].find((axis) => axis.values.every((v) => v === null));
    if (empty) scatterBox.replaceChildren(el('p', { class: 'muted' }, `No run has ${axisTitle(empty).toLowerCase()}.`));
    else drawScatter(scatterBox, report.runs, axes[view.x], axes[view.y], colours.colourOf);
  }

  load();
  const unsubscribeRuns = onStream('runs', () => load());
  const unsubscribeReconnected = onStream('reconnected', () => load());
  // A member's new steps change its figures: re-read at most once a second.
  const unsubscribeRun = onStream('run', (event) => {
    if (runIds.has(event.id) && !pending) pending = setTimeout(() => { pending = null; load(); }, 1000);
  });
  return () => {
    unsubscribeRuns();
    unsubscribeReconnected();
    unsubscribeRun();
    clearTimeout(poll);
    clearTimeout(pending);
    if (controller) controller.abort();
  };
}

// A picker's options, in groups ({label, keys, text(key)}; no label: no optgroup), replaced only
// when they changed, so that a refresh leaves an open picker alone; then `value` chosen.
function setOptions(select, groups, value) {
  const signature = JSON.stringify(groups.map((g) => [g.label, g.keys]));
  if (select.dataset.options !== signature) {
    const options = (g) => g.keys.map((key) => el('option', { value: key }, g.text(key)));
    select.replaceChildren(...groups.map((g) => (g.label ? el('optgroup', { label: g.label }, options(g)) : options(g))).flat());
    select.dataset.options = signature;
  }
  if (select.value !== value) select.value = value;
}

// How the members were drawn: "grid", "random" (the plan as JSON, or as its text).
function planMethod(plan) {
  let parsed = plan;
  if (typeof plan === 'string') {
    try {
      parsed = JSON.parse(plan);
    } catch {
      parsed = null;
    }
  }
  return parsed && typeof parsed.method === 'string' ? parsed.method : 'grid';
}

// A swept field's value as its axis writes it; '–' for none.
function fieldValue(axis, value) {
  return value === null || value === undefined ? '–' : valueText(axis, value);
}

// The best run by the chosen figure, and each swept field it sets differently from the others.
function bestPanel(report) {
  const best = report.best;
  const by = report.best?.figure;
  if (!best) {
    return el('div', { class: 'best-panel', id: 'sweep-best' }, el('p', { class: 'muted' }, 'No run has this figure yet.'));
  }
  const fieldAxis = (field) => report.axes.find((a) => a.key === field) ?? { key: field, figure: false };
  const differences = best.differences.length === 0 ? el('p', { class: 'muted' }, 'Its spec sets no swept field differently from every other run.')
    : table([
      { title: 'Field', value: (d) => d.field },
      { title: `Run ${best.run}`, class: 'best-value', value: (d) => fieldValue(fieldAxis(d.field), d.value) },
      { title: 'The others', value: (d) => d.others.map((v) => fieldValue(fieldAxis(d.field), v)).join(', ') },
    ], best.differences, (d) => ({ 'data-field': d.field }));
  return el('div', { class: 'best-panel', id: 'sweep-best', 'data-run': best.run },
    el('h2', {}, `Best by ${figureLabel(by).toLowerCase()}: `, el('a', { href: `#/run/${best.run}` }, `run ${best.run}`),
      ` (member ${best.position}), ${formatFigure(by, best.value)}`,
      el('span', { class: 'muted' }, best.higher_is_better ? ' — higher is better' : ' — lower is better')),
    differences);
}

// One row per member in plan order: its swept values, state, run, status, error and figures.
function membersTable(report) {
  const { fields } = report.sweep;
  const bestRun = report.best?.run ?? null;
  const has = (figure) => report.members.some((m) => m.figures && m.figures[figure] !== null && m.figures[figure] !== undefined);
  const by = report.best?.figure;
  const figures = [...new Set([by, ...TABLE_FIGURES].filter(Boolean))].filter((f) => f === by || has(f));
  const fieldAxis = (field) => report.axes.find((a) => a.key === field) ?? { key: field, figure: false };
  return el('div', {}, el('h2', {}, 'Members'), el('div', { id: 'sweep-members' }, table([
    { title: '#', class: 'num', value: (m) => m.position },
    ...fields.map((field) => ({ title: field, class: 'swept', value: (m) => fieldValue(fieldAxis(field), m.values[field]) })),
    { title: 'State', value: (m) => el('span', { class: `member-state state-${m.state}` }, m.state.replace('_', ' ')) },
    { title: 'Run', class: 'num', value: (m) => (m.run === null ? '–' : el('a', { href: `#/run/${m.run}` }, m.run)) },
    { title: 'Status', value: (m) => (m.status ? statusBadge(m.status) : '–') },
    { title: 'Error', class: 'error-text', value: (m) => m.error ?? '' },
    // A loss is final only for a completed run, else the last one logged (as on the runs list).
    ...figures.map((figure) => (figure === 'final_loss'
      ? { title: figureLabel(figure), class: 'num', value: (m) => finalLossCell(m.status, m.figures ? m.figures.final_loss : null) }
      : figureColumn(figure, (m) => (m.figures ? m.figures[figure] : null)))),
  ], report.members, (m) => ({ 'data-position': m.position, 'data-run': m.run ?? '',
    class: `member-row${m.run !== null && m.run === bestRun ? ' best-row' : ''}` }))));
}

// The run page's line under its title for a run started for a sweep: "member 2 of 4 of sweep 3:
// NAME", linking to the sweep's page; empty for any other run. Filled once the server answers.
export function sweepOfRunLine(runId) {
  const line = el('div', { class: 'sweep-of-run', id: 'sweep-of-run' });
  getJson(`runs/${runId}/sweep`).then(({ sweep }) => {
    if (!sweep) return;
    line.replaceChildren(`member ${sweep.position} of ${sweep.members} of `,
      el('a', { href: `#/sweeps/${sweep.id}` }, `sweep ${sweep.id}: ${sweep.name}`));
  }).catch(() => {});
  return line;
}
