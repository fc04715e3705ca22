// Small DOM and formatting helpers shared by the views: element building without innerHTML (every
// text from the database goes in as text), tables, and number / time / byte formatting. Importing
// it makes append / prepend / replaceChildren skip null, undefined and false children, as el() does.

// The DOM writes a null child as the text "null" (a view's optional part, such as the run header's
// hang banner, printed "nullnull" under every run). Every view imports this module, so no call of
// these methods anywhere on the page can put such text in again.
function skipMissingChildren(proto, names) {
  for (const name of names) {
    const original = proto[name];
    if (typeof original !== 'function' || original.skipsMissing) continue;
    const wrapped = function appendPresent(...children) {
      return original.apply(this, children.filter((c) => c !== null && c !== undefined && c !== false));
    };
    wrapped.skipsMissing = true;
    proto[name] = wrapped;
  }
}
if (typeof Element !== 'undefined') {
  skipMissingChildren(Element.prototype, ['append', 'prepend', 'replaceChildren', 'before', 'after', 'replaceWith']);
  skipMissingChildren(DocumentFragment.prototype, ['append', 'prepend', 'replaceChildren']);
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (key === 'value') node.value = value;
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// columns: [{title, value: (row) => text or Node, class?}]
export function table(columns, rows, rowAttrs = () => ({})) {
  return el('table', { class: 'grid' },
    el('thead', {}, el('tr', {}, columns.map((c) => el('th', { class: c.class }, c.title)))),
    el('tbody', {}, rows.map((row) => el('tr', rowAttrs(row), columns.map((c) => el('td', { class: c.class }, c.value(row)))))));
}

export function num(value, digits = 3) {
  if (value === undefined || value === null || Number.isNaN(value)) return '–';
  if (typeof value !== 'number') return String(value);
  // An integer as digits up to 2^53 (a learning rate of 1e30 is no count to spell out).
  if (Number.isInteger(value) && Math.abs(value) <= Number.MAX_SAFE_INTEGER) return value.toLocaleString('en-US');
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(2);
  return value.toFixed(digits);
}

export function bytes(value) {
  if (value === undefined || value === null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = value;
  let unit = 0;
  while (Math.abs(v) >= 1024 && unit < units.length - 1) {
    v /= 1024;
    unit += 1;
  }
  return `${v.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function duration(seconds) {
  if (seconds === undefined || seconds === null) return '–';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function time(value) {
  if (value === undefined || value === null || value === '') return '–';
  const date = typeof value === 'number' ? new Date(value * (value < 1e12 ? 1000 : 1)) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toISOString().replace('T', ' ').slice(0, 19);
}

export function statusBadge(status) {
  return el('span', { class: `status status-${status || 'unknown'}` }, status || '?');
}

export function errorBox(error) {
  return el('div', { class: 'error' }, error instanceof Error ? error.message : String(error));
}

// The loss figure's name: final only once the run completed; while it runs, or after it failed or
// was stopped, the loss shown is the last one logged.
export function lossFigureName(status) {
  return status === 'completed' ? 'Final loss' : 'Last loss';
}

// A "Final loss" cell of a table of runs: the value for a completed run; for any other, its last
// logged loss marked as such, or '–'.
export function finalLossCell(status, loss) {
  if (loss === undefined || loss === null) return '–';
  if (status === 'completed') return num(loss, 4);
  return el('span', { class: 'muted last-loss', title: 'The last loss logged: the run has not completed' }, `${num(loss, 4)} (last)`);
}
