// The sweep page's parallel-coordinates chart (issue 37), as SVG (a sweep has tens of runs, not
// thousands): one vertical axis per swept field and one for the chosen figure, each a comparison
// axis of the API placed as the scatter places it (scatter.js's scaleOf: a number by value, anything
// else by category), and one polyline per run through its value on each axis, coloured by its
// value of the figure on a ramp shown as a legend. Runs without the figure are left out, and said.
// Also the ramp itself, so that the scatter colours runs the same way.

import { el } from './dom.js';
import { axisTitle, scaleOf, svg, valueText } from './scatter.js';

// Viridis' ends and three stops between: dark purple for the lowest value, yellow for the highest.
const RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const NO_VALUE = '#9ca3af';

export function rampColour(fraction) {
  const t = Math.min(1, Math.max(0, fraction)) * (RAMP.length - 1);
  const low = Math.min(RAMP.length - 2, Math.floor(t));
  const mix = t - low;
  const channel = (k) => Math.round(RAMP[low][k] + (RAMP[low + 1][k] - RAMP[low][k]) * mix);
  return `rgb(${channel(0)}, ${channel(1)}, ${channel(2)})`;
}

// Each run's colour by its value on `axis` (a numeric figure axis): its place between the lowest
// and the highest value on the ramp; grey without a value.
export function figureColours(axis) {
  const values = axis.values.filter((v) => typeof v === 'number');
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const fraction = (v) => (hi > lo ? (v - lo) / (hi - lo) : 0.5);
  return {
    lo,
    hi,
    colourOf: (i) => (typeof axis.values[i] === 'number' ? rampColour(fraction(axis.values[i])) : NO_VALUE),
  };
}

// The legend: the ramp from the lowest to the highest value, the better end named.
function rampLegend(figureAxis, colours, higherIsBetter) {
  const width = 220;
  const stops = RAMP.map((c, k) => svg('stop', { offset: k / (RAMP.length - 1), 'stop-color': `rgb(${c.join(', ')})` }));
  return el('div', { class: 'legend', id: 'sweep-pc-legend' },
    el('span', {}, axisTitle(figureAxis)),
    el('span', { class: 'legend-low' }, valueText(figureAxis, colours.lo)),
    svg('svg', { width, height: 12, class: 'ramp' },
      svg('defs', {}, svg('linearGradient', { id: 'sweep-ramp' }, stops)),
      svg('rect', { width, height: 12, rx: 2, fill: 'url(#sweep-ramp)' })),
    el('span', { class: 'legend-high' }, valueText(figureAxis, colours.hi)),
    el('span', { class: 'muted' }, higherIsBetter ? '(higher is better)' : '(lower is better)'));
}

// Draws into `box`: `fields` the swept fields' axes, `figureAxis` the chosen figure's, all over
// the runs `runIds` (the axes' values are in their order); `bestRun` drawn on top, thicker.
// Returns the colours (for the scatter) and how many runs were left out.
export function drawParallelCoordinates(box, { fields, figureAxis, runIds, positions, bestRun, higherIsBetter }) {
  const axes = [...fields, figureAxis];
  const width = Math.max(560, 170 * axes.length);
  const height = 380;
  const left = 70;
  const right = 90;
  const top = 44;
  const bottom = 24;
  const plotH = height - top - bottom;
  const step = axes.length > 1 ? (width - left - right) / (axes.length - 1) : 0;
  const xOf = (k) => left + k * step;
  const kept = runIds.map((id, i) => i).filter((i) => typeof figureAxis.values[i] === 'number'
    && fields.every((axis) => axis.values[i] !== null && axis.values[i] !== undefined));
  const axisParts = [];
  axes.forEach((axis, k) => {
    const x = xOf(k);
    // An axis no run has a value on (a figure none of them measured) has no scale to tick.
    const scale = axis.values.some((v) => v !== null) ? scaleOf(axis) : { ticks: [] };
    const ticks = scale.ticks.map((tick) => {
      const y = top + (1 - tick.at) * plotH;
      return [svg('line', { x1: x - 4, x2: x, y1: y, y2: y, stroke: '#6b7280' }),
        svg('text', { x: x - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 10, fill: '#374151', stroke: '#ffffff', 'stroke-width': 3,
          'paint-order': 'stroke' }, tick.text)];
    });
    axisParts.push(svg('g', { class: 'pc-axis', 'data-key': axis.key, 'data-x': x, 'data-top': top, 'data-bottom': top + plotH },
      svg('line', { x1: x, x2: x, y1: top, y2: top + plotH, stroke: '#374151' }),
      svg('text', { x, y: top - 26, 'text-anchor': 'middle', 'font-size': 12, 'font-weight': 600 }, axisTitle(axis)),
      ticks.flat()));
  });
  const colours = figureColours(figureAxis);
  const line = (i) => {
    const points = axes.map((axis, k) => {
      const value = axis.values[i];
      const y = top + (1 - scaleOf(axis).at(axis.numeric ? value : String(value))) * plotH;
      return `${xOf(k).toFixed(2)},${y.toFixed(2)}`;
    });
    const naming = axes.map((axis) => `${axisTitle(axis)} ${valueText(axis, axis.values[i])}`).join(', ');
    const best = runIds[i] === bestRun;
    return svg('polyline', { class: best ? 'pc-line best' : 'pc-line', points: points.join(' '), fill: 'none',
      stroke: colours.colourOf(i), 'stroke-width': best ? 4 : 2, 'data-run': runIds[i] },
    svg('title', {}, `run ${runIds[i]} (member ${positions[i]})${best ? ', the best' : ''}: ${naming}`));
  };
  // The best run last, so that it is drawn over the others.
  const order = [...kept.filter((i) => runIds[i] !== bestRun), ...kept.filter((i) => runIds[i] === bestRun)];
  // The axes over the lines, their labels haloed, so that no line hides a value.
  const parts = [svg('g', { class: 'pc-lines' }, order.map(line)), ...axisParts];
  const leftOut = runIds.filter((id, i) => !kept.includes(i));
  box.replaceChildren(
    svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'parallel-coordinates' }, parts),
    kept.length ? rampLegend(figureAxis, colours, higherIsBetter) : null,
    leftOut.length ? el('p', { class: 'muted', id: 'sweep-pc-note' },
      `Left out, without ${axisTitle(figureAxis).toLowerCase()}: run${leftOut.length === 1 ? '' : 's'} ${leftOut.join(', ')}.`) : null);
  box.dataset.lines = String(kept.length);
  return colours;
}
