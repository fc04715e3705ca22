// Communication per mesh dimension (issue 34) on the run page's Communication tab: a table of the
// dimensions the run's operations ran over (dp, tp, pp, world: GET /api/v1/runs/ID/comm_dims,
// storage/query/comm_by_dimension.h), and a uPlot chart of each rank's communication time per step
// in each dimension, the ranks in the page's grouping order (mesh.js), as the desktop's table.

import uPlot from './uPlot.esm.js';
import { el, table, num, bytes } from './dom.js';
import { coordsText } from './mesh.js';

const DIM_COLORS = { dp: '#1f77b4', tp: '#d62728', pp: '#2ca02c', world: '#7f7f7f' };

function optionalMs(value) {
  return value === null || value === undefined ? '–' : num(value, 2);
}

// The dimensions' table: comm.dims as the API sends them.
export function dimsTable(comm) {
  const dims = comm.dims || [];
  const total = dims.reduce((sum, d) => sum + (d.total_ms || 0), 0);
  return table([
    { title: 'Dimension', value: (d) => d.dim },
    { title: 'Ranks', class: 'num', value: (d) => num(d.ranks) },
    { title: 'Operations', class: 'num', value: (d) => num(d.operations) },
    { title: 'Bytes', class: 'num', value: (d) => bytes(d.bytes) },
    { title: 'ms per step', class: 'num', value: (d) => num(d.ms_per_step, 2) },
    { title: 'Time ms', class: 'num', value: (d) => num(d.total_ms, 1) },
    { title: 'Share of comm', class: 'num', value: (d) => (total > 0 ? `${(100 * d.total_ms / total).toFixed(1)} %` : '–') },
    { title: 'Wait ms', class: 'num', value: (d) => optionalMs(d.wait_ms) },
    { title: 'Exposed ms', class: 'num', value: (d) => optionalMs(d.exposed_ms) },
  ], dims, (d) => ({ 'data-dim': d.dim }));
}

// The chart's columns: x the ranks' places in `order`, a series per dimension of comm.dims (ms per
// step, 0 where a rank ran none there).
export function dimsPlotData(comm, order) {
  const dims = (comm.dims || []).map((d) => d.dim);
  const perRank = new Map();
  for (const r of comm.ranks || []) perRank.set(`${r.rank}/${r.dim}`, r.ms_per_step);
  const xs = Float64Array.from(order, (_, i) => i);
  const data = [xs, ...dims.map((dim) => Array.from(order, (rank) => perRank.get(`${rank}/${dim}`) ?? 0))];
  return { dims, data };
}

// Draws the chart into `container` (replacing what was there). coords: [{dp, tp, pp}] by rank.
export function drawDimsChart(container, comm, order, coords) {
  const { dims, data } = dimsPlotData(comm, order);
  if (dims.length === 0 || order.length === 0) {
    container.replaceChildren(el('p', { class: 'muted' }, 'No communication recorded.'));
    return;
  }
  const box = el('div', { class: 'dims-chart', id: 'chart-comm-dims', 'data-dims': dims.join(','),
    'data-ranks': order.join(','), 'data-values': JSON.stringify(data.slice(1)) });
  container.replaceChildren(el('h2', {}, 'Communication per step, by mesh dimension and rank'), box);
  const rankAt = (x) => order[Math.round(x)];
  const options = {
    width: Math.max(360, Math.min(1100, 120 + 60 * order.length)),
    height: 220,
    scales: { x: { time: false, range: [-0.5, order.length - 0.5] } },
    axes: [
      { values: (u, splits) => splits.map((x) => (Number.isInteger(x) && rankAt(x) !== undefined ? `r${rankAt(x)}` : '')), incrs: [1] },
      { label: 'ms per step' },
    ],
    series: [
      { label: 'rank', value: (u, x) => (x === null || rankAt(x) === undefined ? '--' : `rank ${rankAt(x)} (${coordsText(coords[rankAt(x)])})`) },
      ...dims.map((dim) => ({ label: dim, stroke: DIM_COLORS[dim] || '#9467bd', width: 1.5, points: { size: 7 },
        value: (u, v) => (v === null ? '--' : `${num(v, 3)} ms`) })),
    ],
  };
  new uPlot(options, data, box);  // eslint-disable-line no-new
}
