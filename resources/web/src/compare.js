// The compare page: runs named in the URL (#/compare?runs=1,2,3&metrics=loss,eval/acc) with any
// metric they recorded overlaid on one step axis (each run's rank band median; loss, tokens/s where
// a run has tokens, and step time by default, and the metric picker adds any other of the runs'
// metrics, issue 33), their figures side by side and the spec fields in which they differ. Runs
// are picked on the runs list or typed here.

import { getJson } from './api.js';
import { el, table, num, errorBox, finalLossCell } from './dom.js';
import { replaceParams } from './route.js';
import { StepChart, loadMetric, rankColor } from './chart.js';
import { chartControls } from './chart_settings.js';

// The built-in overlays' element ids, as before the picker.
const CHART_IDS = { loss: 'compare-loss', tokens_per_s: 'compare-throughput', step_ms: 'compare-step' };

export function mount(root, route) {
  let ids = (route.params.get('runs') || '').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  let shown = (route.params.get('metrics') || '').split(',').filter((m) => m !== '');
  const input = el('input', { id: 'compare-runs', placeholder: 'run ids, e.g. 3,4', value: ids.join(',') });
  const go = el('button', { onclick: () => {
    ids = input.value.split(/[ ,]+/).map(Number).filter((n) => Number.isInteger(n) && n > 0);
    saveUrl();
    load();
  } }, 'Compare');
  const content = el('div', {});
  const controls = chartControls();
  root.append(el('h1', {}, 'Compare runs'), el('div', { class: 'toolbar' }, input, go, controls.element), content);
  const charts = [];
  const controller = new AbortController();
  let recorded = [];  // each run's metrics, in the order of ids

  function saveUrl() {
    replaceParams(new URLSearchParams({ runs: ids.join(','), metrics: shown.join(',') }));
  }

  async function load() {
    for (const c of charts) c.destroy();
    charts.length = 0;
    if (ids.length < 2) {
      content.replaceChildren(el('p', { class: 'muted' }, 'Name two or more runs (or tick them on the runs list).'));
      return;
    }
    try {
      const body = await getJson('compare', { runs: ids.join(',') }, controller.signal);
      const offered = body.metrics || [];
      const has = (key) => offered.some((m) => m.key === key);
      // By default: loss, tokens/s only where a run has tokens, step time.
      if (shown.length === 0) shown = ['loss', 'tokens_per_s', 'step_ms'].filter(has);
      const boxes = el('div', {});
      content.replaceChildren(figuresTable(body), differencesTable(body), metricPicker(offered, boxes), boxes);
      recorded = (body.runs || []).map((r) => new Set(r.metrics || []));
      for (const key of shown) await addOverlay(boxes, offered, key);
    } catch (error) {
      if (error.name !== 'AbortError') content.replaceChildren(errorBox(error));
    }
  }

  // The picker: every metric of the runs not overlaid yet; "Overlay" adds its chart.
  function metricPicker(offered, boxes) {
    const select = el('select', { id: 'compare-metric' });
    const fill = () => select.replaceChildren(...offered.filter((m) => !shown.includes(m.key))
      .map((m) => el('option', { value: m.key }, m.title === m.key ? m.key : `${m.title} (${m.key})`)));
    fill();
    const add = el('button', { id: 'compare-add', onclick: async () => {
      if (!select.value) return;
      shown.push(select.value);
      saveUrl();
      const key = select.value;
      fill();
      await addOverlay(boxes, offered, key);
    } }, 'Overlay');
    return el('div', { class: 'toolbar' }, el('label', {}, 'Metric ', select), add);
  }

  async function addOverlay(boxes, offered, key) {
    const metric = offered.find((m) => m.key === key) || { key, title: key };
    const box = el('div', { class: 'chart', id: CHART_IDS[key] || `compare-metric-${key}`, 'data-metric': key });
    boxes.append(box);
    await overlay(box, `${metric.title} (median over ranks)`, key);
  }

  async function overlay(box, title, metric) {
    const chart = new StepChart(box, title, {});
    charts.push(chart);
    const buckets = Math.max(1, Math.min(4096, Math.round(chart.width())));
    // Only the runs that recorded the metric are asked for it.
    const loaded = await Promise.all(ids.map((id, i) => (recorded[i] && !recorded[i].has(metric)
      ? { lines: [] }
      : loadMetric(id, metric, 'band', '', '', buckets, controller.signal).catch(() => ({ lines: [] })))));
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
    box.dataset.lines = String(loaded.filter((l) => l.lines.length > 0).length);
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
    ['Samples/s', (r) => num(r.samples_per_second, 1)],
    // Only for models with tokens (issue 33).
    runs.some((r) => r.tokens_per_second != null) ? ['Tokens/s', (r) => num(r.tokens_per_second, 1)] : null,
    ['Mean step ms', (r) => num(r.mean_step_ms, 2)], ['Comm share', (r) => pct(r.comm_share)],
    ['Bubble', (r) => pct(r.bubble_fraction)], ['Duration s', (r) => num(r.run.duration_s, 1)],
  ].filter(Boolean);
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
