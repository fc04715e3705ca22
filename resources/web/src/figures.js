// The one table of figures (GET /api/v1/figures, storage/query/figures.h): every number of the run
// report by the one name the desktop and the command line give it, and its value formatted by its
// kind (a fraction as a percentage, bytes as MiB, ...). Loaded once, before the first page draws.

import { getJson } from './api.js';
import { num, bytes, duration } from './dom.js';

const figures = new Map();

export async function loadFigures() {
  const body = await getJson('figures');
  for (const figure of body.figures) figures.set(figure.id, figure);
}

// The figure's name as a heading: its first letter capitalised ("Final loss", "MFU").
export function figureLabel(id) {
  const name = figures.has(id) ? figures.get(id).name : id;
  return name.charAt(0).toUpperCase() + name.slice(1);
}

// A column heading: the label with the unit of a bare number ("Mean step ms").
export function figureColumnTitle(id) {
  const figure = figures.get(id);
  return figure && figure.kind === 'ms' ? `${figureLabel(id)} ms` : figureLabel(id);
}

export function figureDescription(id) {
  return figures.has(id) ? figures.get(id).description : '';
}

// A value of the figure as text; '–' where there is none. `bare`: ms without their unit (a column
// whose title says it).
export function formatFigure(id, value, bare = false) {
  if (value === undefined || value === null) return '–';
  switch (figures.has(id) ? figures.get(id).kind : 'number') {
    case 'fraction': return `${(100 * value).toFixed(1)} %`;
    case 'bytes': return bytes(value);
    case 'seconds': return duration(value);
    case 'ms': return bare ? num(value, 2) : `${num(value, 2)} ms`;
    case 'rate': return num(value, 1);
    case 'count': return num(value);
    default: return num(value, 4);
  }
}

// A table column of a figure: its title, right-aligned, formatted (ms bare: the title says it).
export function figureColumn(id, value = (row) => row[id]) {
  return { title: figureColumnTitle(id), class: 'num', value: (row) => formatFigure(id, value(row), true) };
}
