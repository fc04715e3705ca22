// The compare page: runs named in the URL (#/compare?runs=1,2,3&metrics=loss,eval/acc) with any
// metric they recorded overlaid on one step axis (each run's rank band median; loss, tokens/s where
// a run has tokens, and step time by default, and the metric picker adds any other of the runs'
// metrics, issue 33), their figures side by side and the spec fields in which they differ. Runs
// are picked on the runs list or typed here. A scatter puts the runs on any two axes (a figure or a
// spec field: final loss against optimizer.lr), and "colour by" gives runs with the same value of a
// spec field one colour, in the scatter and the overlays; the URL keeps x, y and colour.

import { getJson } from './api.js';
import { el, table, errorBox, finalLossCell } from './dom.js';
import { replaceParams } from './route.js';
import { StepChart, loadMetric, rankColor } from './chart.js';
import { chartControls } from './chart_settings.js';
import { figureLabel, formatFigure } from './figures.js';
import { drawScatter, groupColours, legendBox } from './scatter.js';

// The built-in overlays' element ids, as before the picker.
const CHART_IDS = { loss: 'compare-loss', tokens_per_s: 'compare-throughput', step_ms: 'compare-step' };

export function mount(root, route) {
  let ids = (route.params.get('runs') || '').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  let shown = (route.params.get('metrics') || '').split(',').filter((m) => m !== '');
  const view = { x: route.params.get('x') || '', y: route.params.get('y') || '', colour: route.params.get('colour') || '' };
  const colours = { colourOf: (i) => rankColor(i) };  // set by the scatter's colour-by picker
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
    replaceParams(new URLSearchParams({ runs: ids.join(','), metrics: shown.join(','), x: view.x, y: view.y, colour: view.colour }));
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
      // A new colour-by redraws the overlays in the groups' colours.
      const recolour = async () => {
        for (const c of charts) c.destroy();
        charts.length = 0;
        boxes.replaceChildren();
        for (const key of shown) await addOverlay(boxes, offered, key);
      };
      content.replaceChildren(figuresTable(body), differencesTable(body), scatterSection(body.axes, recolour),
        metricPicker(offered, boxes), boxes);
      recorded = (body.runs || []).map((r) => new Set(r.metrics || []));
      for (const key of shown) await addOverlay(boxes, offered, key);
    } catch (error) {
      if (error.name !== 'AbortError') content.replaceChildren(errorBox(error));
    }
  }

  // The scatter of the runs on two axes with its pickers, and the colour-by picker, which sets
  // `colours` (shared with the overlays, which `recolour` redraws).
  function scatterSection(axes, recolour) {
    const figures = axes.figures;
    const fields = axes.spec_fields;
    const known = (key) => key in axes.values;
    if (!known(view.x)) view.x = axes.differing_fields > 0 ? fields[0] : 'final_step';
    if (!known(view.y)) view.y = 'final_loss';
    if (view.colour && !fields.includes(view.colour)) view.colour = '';
    const options = () => [
      el('optgroup', { label: 'Figures' }, figures.map((key) => el('option', { value: key }, figureLabel(key)))),
      el('optgroup', { label: 'Spec fields' }, fields.map((key, i) => el('option', { value: key }, i < axes.differing_fields ? `${key} (differs)` : key))),
    ];
    const picker = (id, key) => {
      const select = el('select', { id, onchange: () => { view[key] = select.value; saveUrl(); draw(); } }, key === 'colour'
        ? [el('option', { value: '' }, 'each run its own colour'), el('optgroup', { label: 'Spec fields' }, fields.map((f) => el('option', { value: f }, f)))]
        : options());
      select.value = view[key];
      return select;
    };
    const box = el('div', { class: 'scatter-box', id: 'compare-scatter' });
    const legend = el('div', {});
    function draw() {
      Object.assign(colours, groupColours(ids, view.colour ? axes.values[view.colour] : null));
      drawScatter(box, ids, axes.values[view.x], axes.values[view.y], colours.colourOf);
      legend.replaceChildren(legendBox('compare-legend', colours.legend));
    }
    const colourPicker = picker('compare-colour', 'colour');
    colourPicker.addEventListener('change', recolour);
    draw();
    return el('div', {}, el('h2', {}, 'Runs on two axes'),
      el('div', { class: 'toolbar' }, el('label', {}, 'X ', picker('compare-x', 'x')), el('label', {}, 'Y ', picker('compare-y', 'y')),
        el('label', {}, 'Colour by ', colourPicker)),
      box, legend);
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
      series.push({ label: `run ${ids[i]}`, stroke: colours.colourOf(i), width: 1.5, spanGaps: true });
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

// body.runs: each run's report (as the run page's); one column per run.
function figuresTable(body) {
  const runs = body.runs || [];
  // The figures by their names in the table of figures (figures.js).
  const figure = (id) => [figureLabel(id), (r) => formatFigure(id, id === 'duration_s' ? r.run.duration_s : r[id])];
  const rows = [
    ['Name', (r) => r.run.name], ['Strategy', (r) => r.run.strategy], ['Status', (r) => r.run.status], ['Ranks', (r) => r.run.world_size],
    figure('final_step'), [figureLabel('final_loss'), (r) => finalLossCell(r.run.status, r.final_loss)],
    figure('samples_per_second'),
    // Only for models with tokens (issue 33).
    runs.some((r) => r.tokens_per_second != null) ? figure('tokens_per_second') : null,
    ...['mean_step_ms', 'comm_share', 'bubble_fraction', 'peak_memory', 'duration_s'].map(figure),
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
