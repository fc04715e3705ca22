// The compare page: runs named in the URL (#/compare?runs=1,2,3) with loss, throughput and step
// time (each the rank band's median) overlaid on one step axis, their figures side by side and the spec fields
// in which they differ. Runs are picked on the runs list or typed here. A scatter puts the runs on
// any two axes (a figure or a spec field: final loss against optimizer.lr), and "colour by" gives
// runs with the same value of a spec field one colour, in the scatter and the overlays; the URL
// keeps x, y and colour.

import { getJson } from './api.js';
import { el, table, errorBox } from './dom.js';
import { replaceParams } from './route.js';
import { StepChart, loadMetric } from './chart.js';
import { figureLabel, formatFigure } from './figures.js';
import { drawScatter, groupColours, legendBox } from './scatter.js';

export function mount(root, route) {
  let ids = (route.params.get('runs') || '').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  const view = { x: route.params.get('x') || '', y: route.params.get('y') || '', colour: route.params.get('colour') || '' };
  const saveUrl = () => replaceParams(new URLSearchParams({ runs: ids.join(','), x: view.x, y: view.y, colour: view.colour }));
  const input = el('input', { id: 'compare-runs', placeholder: 'run ids, e.g. 3,4', value: ids.join(',') });
  const go = el('button', { onclick: () => {
    ids = input.value.split(/[ ,]+/).map(Number).filter((n) => Number.isInteger(n) && n > 0);
    saveUrl();
    load();
  } }, 'Compare');
  const content = el('div', {});
  root.append(el('h1', {}, 'Compare runs'), el('div', { class: 'toolbar' }, input, go), content);
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
      const colours = { colourOf: () => '#000000' };
      const scatter = scatterSection(body.axes, colours, () => {
        for (const c of charts) c.destroy();
        charts.length = 0;
        overlays();
      });
      content.replaceChildren(figuresTable(body), differencesTable(body), scatter, lossBox, throughputBox, stepBox);
      const overlays = async () => {
        await overlay(lossBox, 'Loss (median over ranks)', 'loss', colours.colourOf);
        await overlay(throughputBox, 'Throughput: tokens/s of one rank (median over ranks)', 'tokens_per_s', colours.colourOf);
        await overlay(stepBox, 'Step time (ms, median over ranks)', 'step_ms', colours.colourOf);
      };
      await overlays();
    } catch (error) {
      if (error.name !== 'AbortError') content.replaceChildren(errorBox(error));
    }
  }

  // The scatter of the runs on two axes with its pickers, and the colour-by picker; `colours` gets
  // each run's colour (shared with the overlays, which `recolour` redraws).
  function scatterSection(axes, colours, recolour) {
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

  async function overlay(box, title, metric, colourOf) {
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
      series.push({ label: `run ${ids[i]}`, stroke: colourOf(i), width: 1.5, spanGaps: true });
    });
    chart.update({ data, series, bands: [] });
    box.dataset.points = String(chart.pointCount());
  }

  load();
  return () => {
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
    ...['final_step', 'final_loss', 'samples_per_second', 'tokens_per_second', 'mean_step_ms', 'comm_share',
      'bubble_fraction', 'peak_memory', 'duration_s'].map(figure),
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
