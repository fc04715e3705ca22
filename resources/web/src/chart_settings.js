// The charts' view settings, shared by every chart of every page and kept in localStorage: the
// smoothing weight (TensorBoard's, 0 = off, as the desktop's spin box) and the logarithmic y axis.
// Also the toolbar that sets them and the keyboard shortcuts with their help overlay, and which
// ranks a run's charts show by default; the charts (chart.js) follow the settings through
// onChartSettings.

import { el } from './dom.js';

const STORAGE_KEY = 'ringmaster.charts';
const DEFAULTS = { smoothing: 0, log: false };
export const MAX_SMOOTHING = 0.99;

function clampSmoothing(value) {
  const v = Number(value);
  return Number.isFinite(v) ? Math.min(MAX_SMOOTHING, Math.max(0, v)) : 0;
}

function loadSettings() {
  try {
    const saved = JSON.parse(window.localStorage.getItem(STORAGE_KEY) || '{}');
    return { smoothing: clampSmoothing(saved.smoothing ?? DEFAULTS.smoothing), log: saved.log === true };
  } catch {
    return { ...DEFAULTS };
  }
}

let settings = loadSettings();
const listeners = new Set();

export function chartSettings() {
  return settings;
}

// change: {smoothing?, log?}; saved, then every listener is told.
export function changeChartSettings(change) {
  const next = { ...settings, ...change };
  next.smoothing = clampSmoothing(next.smoothing);
  next.log = next.log === true;
  if (next.smoothing === settings.smoothing && next.log === settings.log) return;
  settings = next;
  try {
    window.localStorage.setItem(STORAGE_KEY, JSON.stringify(settings));
  } catch {
    // Storage refused (private mode, quota): the settings hold for this page only.
  }
  for (const listener of listeners) listener(settings);
}

// Returns the function that stops listening.
export function onChartSettings(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

// Which ranks a run's charts show when the URL does not say: a line per rank up to 8 ranks, the
// min / median / max band past that, as the desktop's charts tab (ChartsTab::setWorldSize).
export const BAND_ABOVE_RANKS = 8;
export function defaultRanks(worldSize) {
  return worldSize > BAND_ABOVE_RANKS ? 'band' : 'all';
}

const SHORTCUTS = [
  ['s', 'Focus the smoothing slider (then ← / → change it)'],
  ['0', 'Smoothing off'],
  ['l', 'Logarithmic y axis on / off'],
  ['?', 'Show / hide this help'],
  ['Esc', 'Close this help'],
];

// The toolbar's chart controls (#smoothing, #log-scale, the help button) and the page's keyboard
// shortcuts. Returns {element, uninstall}: put element in the toolbar, call uninstall on unmount.
export function chartControls() {
  const slider = el('input', {
    id: 'smoothing', type: 'range', min: '0', max: String(MAX_SMOOTHING), step: '0.01',
    value: String(settings.smoothing), title: 'Smoothing (s): TensorBoard\'s debiased exponential moving average; the raw line stays faint behind',
    oninput: () => changeChartSettings({ smoothing: Number(slider.value) }),
  });
  const shown = el('span', { class: 'smoothing-value', id: 'smoothing-value' });
  const log = el('input', { id: 'log-scale', type: 'checkbox', onchange: () => changeChartSettings({ log: log.checked }) });
  const help = shortcutHelp();
  const helpButton = el('button', { id: 'shortcuts-button', title: 'Keyboard shortcuts (?)', onclick: () => help.toggle() }, '?');
  const element = el('span', { class: 'chart-controls' },
    el('label', { title: slider.title }, 'Smoothing ', slider, shown),
    el('label', { title: 'Logarithmic y axis (l)' }, log, ' Log scale'),
    helpButton, help.element);

  function show(s) {
    slider.value = String(s.smoothing);
    shown.textContent = s.smoothing > 0 ? s.smoothing.toFixed(2) : 'off';
    log.checked = s.log;
  }
  show(settings);
  const stopListening = onChartSettings(show);

  function onKey(event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
    if (event.key === 'Escape' && help.open()) help.toggle(false);
    else if (event.key === '?') help.toggle();
    else if (event.key === 's') slider.focus();
    else if (event.key === '0') changeChartSettings({ smoothing: 0 });
    else if (event.key === 'l' || event.key === 'L') changeChartSettings({ log: !settings.log });
    else return;
    event.preventDefault();
  }
  document.addEventListener('keydown', onKey);
  return {
    element,
    uninstall: () => {
      stopListening();
      document.removeEventListener('keydown', onKey);
    },
  };
}

// A key pressed in a text field, a select or an editable element is the user's text, not a
// shortcut; the smoothing slider keeps its own arrow keys, and takes the others as shortcuts.
function isTyping(target) {
  if (!(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  if (target.tagName === 'TEXTAREA' || target.tagName === 'SELECT') return true;
  return target.tagName === 'INPUT' && !['range', 'checkbox', 'radio', 'button'].includes(target.type);
}

function shortcutHelp() {
  const element = el('div', { class: 'shortcut-help', id: 'shortcut-help', hidden: true, role: 'dialog' },
    el('h2', {}, 'Keyboard shortcuts'),
    el('table', { class: 'grid' }, el('tbody', {}, SHORTCUTS.map(([key, what]) => el('tr', {}, el('td', {}, el('kbd', {}, key)), el('td', {}, what))))),
    el('p', { class: 'muted' }, 'Drag across a chart to zoom, double-click it for the whole run; the hover line moves on every chart at once.'));
  return {
    element,
    open: () => !element.hidden,
    toggle: (force) => { element.hidden = force === undefined ? !element.hidden : !force; },
  };
}
