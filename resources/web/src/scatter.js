// Runs on any two axes, and runs coloured by a spec field (issue 33): the compare page's scatter,
// drawn as SVG (a handful of points: no canvas), each axis one of the API's comparison axes
// (storage/query/compare_axes.h: a numeric axis placed by value, any other by category); and the
// colour swatches and legend shared by the compare page and the runs list. Runs whose value of
// the colour field is the same share a colour.

import { el, num } from './dom.js';
import { figureLabel, formatFigure } from './figures.js';
import { rankColor } from './chart.js';

const SVG = 'http://www.w3.org/2000/svg';

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function colourSwatch(colour) {
  return svg('svg', { width: 12, height: 12, class: 'colour-swatch' }, svg('rect', { width: 12, height: 12, rx: 2, fill: colour }));
}

// An axis's title: a figure's name with its unit, a spec field's path.
export function axisTitle(axis) {
  if (!axis.figure) return axis.key;
  return axis.unit && axis.unit !== axis.name ? `${figureLabel(axis.key)} (${axis.unit})` : figureLabel(axis.key);
}

export function valueText(axis, value) {
  return axis.figure ? formatFigure(axis.key, value) : (typeof value === 'number' ? num(value, 4) : String(value));
}

// Where a value lies in [0, 1], and the ticks: numbers by value (padded), categories evenly. The
// sweep page's parallel coordinates place their axes with it too.
export function scaleOf(axis) {
  if (axis.numeric) {
    const values = axis.values.filter((v) => v !== null);
    let lo = Math.min(...values);
    let hi = Math.max(...values);
    if (!(hi > lo)) {
      const pad = Math.abs(lo) * 0.1 || 1;
      lo -= pad;
      hi += pad;
    }
    const pad = (hi - lo) * 0.08;
    lo -= pad;
    hi += pad;
    const at = (v) => (v - lo) / (hi - lo);
    const ticks = [0.1, 0.3, 0.5, 0.7, 0.9].map((f) => lo + (hi - lo) * f).map((v) => ({ at: at(v), text: valueText(axis, v) }));
    return { at, ticks };
  }
  const n = Math.max(1, axis.categories.length);
  const at = (v) => (axis.categories.indexOf(v) + 0.5) / n;
  return { at, ticks: axis.categories.map((c) => ({ at: at(c), text: c })) };
}

const NO_GROUP = '#999999';  // a run whose spec lacks the field

// Colour by the axis `by` ({key, categories, groups}; null: each run its own colour): each run's
// colour, and the legend with each group's count.
export function groupColours(runIds, by) {
  if (!by) {
    return { colourOf: (i) => rankColor(i), legend: runIds.map((id, i) => ({ label: `run ${id}`, colour: rankColor(i), group: String(i) })) };
  }
  const colourOf = (i) => (by.groups[i] === null ? NO_GROUP : rankColor(by.groups[i]));
  const legend = by.categories.map((c, k) => ({ label: `${by.key} = ${c}`, colour: rankColor(k), group: String(k),
    count: by.groups.filter((g) => g === k).length }));
  const none = by.groups.filter((g) => g === null).length;
  if (none > 0) legend.push({ label: `no ${by.key}`, colour: NO_GROUP, group: 'none', count: none });
  return { colourOf, legend };
}

export function legendBox(id, items) {
  return el('div', { class: 'legend', id }, items.map((item) => el('span', { class: 'legend-item', 'data-group': item.group },
    colourSwatch(item.colour), item.count !== undefined ? `${item.label} (${item.count})` : item.label)));
}

// The scatter of runs: x and y are comparison axes (values one per run), runIds the runs in order.
export function drawScatter(box, runIds, x, y, colourOf) {
  const width = 640;
  const height = 360;
  const left = 90;
  const bottom = 56;
  const top = 16;
  const right = 24;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const sx = scaleOf(x);
  const sy = scaleOf(y);
  const px = (v) => left + sx.at(v) * plotW;
  const py = (v) => top + (1 - sy.at(v)) * plotH;
  const parts = [svg('rect', { x: left, y: top, width: plotW, height: plotH, fill: 'none', stroke: '#d1d5db' })];
  for (const tick of sx.ticks) {
    const at = left + tick.at * plotW;
    parts.push(svg('line', { x1: at, x2: at, y1: top + plotH, y2: top + plotH + 4, stroke: '#6b7280' }),
      svg('text', { x: at, y: top + plotH + 16, 'text-anchor': 'middle', 'font-size': 11, fill: '#374151' }, tick.text));
  }
  for (const tick of sy.ticks) {
    const at = top + (1 - tick.at) * plotH;
    parts.push(svg('line', { x1: left - 4, x2: left, y1: at, y2: at, stroke: '#6b7280' }),
      svg('text', { x: left - 6, y: at + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#374151' }, tick.text));
  }
  parts.push(svg('text', { class: 'axis-x', x: left + plotW / 2, y: height - 8, 'text-anchor': 'middle', 'font-size': 12 }, axisTitle(x)),
    svg('text', { class: 'axis-y', x: 14, y: top + plotH / 2, 'text-anchor': 'middle', 'font-size': 12, transform: `rotate(-90 14 ${top + plotH / 2})` }, axisTitle(y)));
  let drawn = 0;
  runIds.forEach((id, i) => {
    const vx = x.values[i];
    const vy = y.values[i];
    if (vx === null || vy === null) return;
    drawn += 1;
    const cx = px(x.numeric ? vx : String(vx));
    const cy = py(y.numeric ? vy : String(vy));
    parts.push(svg('circle', { class: 'point', cx, cy, r: 6, fill: colourOf(i), stroke: '#ffffff', 'data-run': id, 'data-x': String(vx), 'data-y': String(vy) },
      svg('title', {}, `run ${id}: ${axisTitle(x)} ${valueText(x, vx)}, ${axisTitle(y)} ${valueText(y, vy)}`)),
    svg('text', { x: cx + 8, y: cy - 6, 'font-size': 11, fill: '#374151' }, `#${id}`));
  });
  box.replaceChildren(svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'scatter' }, parts));
  box.dataset.points = String(drawn);
}
