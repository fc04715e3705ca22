// The compare page: runs named in the URL (#/compare?runs=1,2,3) with loss, throughput and step
// time (each the rank band's median) overlaid on one step axis, their figures side by side and the spec fields
// in which they differ. Runs are picked on the runs list or typed here.

import { getJson } from './api.js';
import { el, table, num, errorBox, finalLossCell } from './dom.js';
import { replaceParams } from './route.js';
import { StepChart, loadMetric, rankColor } from './chart.js';
import { chartControls } from './chart_settings.js';

export function mount(root, route) {
  let ids = (route.params.get('runs') || '').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  const input = el('input', { id: 'compare-runs', placeholder: 'run ids, e.g. 3,4', value: ids.join(',') });
  const go = el('button', { onclick: () => {
    ids = input.value.split(/[ ,]+/).map(Number).filter((n) => Number.isInteger(n) && n > 0);
    replaceParams(new URLSearchParams({ runs: ids.join(',') }));
    load();
  } }, 'Compare');
  const content = el('div', {});
  const controls = chartControls();
  root.append(el('h1', {}, 'Compare runs'), el('div', { class: 'toolbar' }, input, go, controls.element), content);
  const charts = [];
  const controller = new AbortController();

  async function load() {
    for (const c of charts) c.destroy();
    charts.length = 0;
    if (ids.length < 2) {
      content.replaceChildren(el('p', { class: 'muted' }, 'Name two or more runs (or tick them on the runs list).'));
      return;
    }
    try {
      const body = await getJson('compare', { runs: ids.join(',') }, controller.signal);
      const lossBox = el('div', { class: 'chart', id: 'compare-loss' });
      const throughputBox = el('div', { class: 'chart', id: 'compare-throughput' });
      const stepBox = el('div', { class: 'chart', id: 'compare-step' });
      content.replaceChildren(figuresTable(body), differencesTable(body), lossBox, throughputBox, stepBox);
      await overlay(lossBox, 'Loss (median over ranks)', 'loss');
      await overlay(throughputBox, 'Throughput: tokens/s of one rank (median over ranks)', 'tokens_per_s');
      await overlay(stepBox, 'Step time (ms, median over ranks)', 'step_ms');
    } catch (error) {
      if (error.name !== 'AbortError') content.replaceChildren(errorBox(error));
    }
  }

  async function overlay(box, title, metric) {
    const chart = new StepChart(box, title, {});
    charts.push(chart);
    const buckets = Math.max(1, Math.min(4096, Math.round(chart.width())));
    const loaded = await Promise.all(ids.map((id) => loadMetric(id, metric, 'band', '', '', buckets, controller.signal)
      .catch(() => ({ lines: [] }))));
    const steps = new Set();
    for (const l of loaded) for (const line of l.lines) for (const s of line.points.keys()) steps.add(s);
    const xs = Float64Array.from([...steps].sort((a, b) => a - b));
    const data = [xs];
    const series = [{ label: 'step' }];
    loaded.forEach((l, i) => {
      const points = l.lines[0] ? l.lines[0].points : new Map();
      data.push(Array.from(xs, (x) => (points.has(x) ? points.get(x).median : null)));
      series.push({ label: `run ${ids[i]}`, stroke: rankColor(i), width: 1.5, spanGaps: true });
    });
    chart.update({ data, series, bands: [] });
    box.dataset.points = String(chart.pointCount());
  }

  load();
  return () => {
    controls.uninstall();
    controller.abort();
    for (const c of charts) c.destroy();
  };
}

function pct(value) {
  return value === undefined || value === null ? '–' : `${(100 * value).toFixed(1)} %`;
}

// body.runs: each run's report (as the run page's); one column per run.
function figuresTable(body) {
  const runs = body.runs || [];
  const rows = [
    ['Name', (r) => r.run.name], ['Strategy', (r) => r.run.strategy], ['Status', (r) => r.run.status], ['Ranks', (r) => r.run.world_size],
    ['Final step', (r) => num(r.final_step)], ['Final loss', (r) => finalLossCell(r.run.status, r.final_loss)],
    ['Samples/s', (r) => num(r.samples_per_second, 1)], ['Tokens/s', (r) => num(r.tokens_per_second, 1)],
    ['Mean step ms', (r) => num(r.mean_step_ms, 2)], ['Comm share', (r) => pct(r.comm_share)],
    ['Bubble', (r) => pct(r.bubble_fraction)], ['Duration s', (r) => num(r.run.duration_s, 1)],
  ];
  return el('div', {}, el('h2', {}, 'Figures'), table(
    [{ title: '', value: (row) => row[0] }, ...runs.map((r, i) => ({ title: `Run ${r.run.id}`, class: 'num', value: (row) => row[1](r) ?? '–' }))],
    rows,
  ));
}

function differencesTable(body) {
  const differences = body.spec_differences || [];
  const runs = body.runs || [];
  if (differences.length === 0) return el('p', {}, 'The runs\' specs do not differ.');
  return el('div', {}, el('h2', {}, 'Spec differences'), table(
    [{ title: 'Field', value: (d) => d.path }, ...runs.map((r, i) => ({ title: `Run ${r.run.id}`, value: (d) => d.values[i] ?? '–' }))],
    differences,
  ));
}
