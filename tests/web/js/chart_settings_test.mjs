// The charts' settings (resources/web/src/chart_settings.js) without a browser: the smoothing
// weight clamped to the slider's 0..0.99 whatever is given or was stored, both settings kept in
// localStorage and read back by the next page, listeners told of a change once, and the ranks a
// run's charts open on: a line per rank up to 8 ranks, the band past that, as the desktop. Issue 33.
//
// node chart_settings_test.mjs SRC_DIR (resources/web/src)

import path from 'node:path';
import { pathToFileURL } from 'node:url';

const source = process.argv[2];
if (!source) {
  console.log('usage: node chart_settings_test.mjs SRC_DIR');
  process.exit(2);
}

// The browser's localStorage, as a Map: what one page stores, the next page reads.
const stored = new Map();
globalThis.window = {
  localStorage: {
    getItem: (key) => (stored.has(key) ? stored.get(key) : null),
    setItem: (key, value) => stored.set(key, String(value)),
  },
};
let pages = 0;
// A fresh copy of the module, as a new page load gets.
const openPage = () => import(`${pathToFileURL(path.resolve(source, 'chart_settings.js')).href}?page=${(pages += 1)}`);

const failures = [];
function check(condition, message) {
  if (!condition) failures.push(message);
  console.log(`${condition ? 'ok' : 'FAIL'}: ${message}`);
}

const first = await openPage();
check(first.chartSettings().smoothing === 0 && first.chartSettings().log === false, 'smoothing off and a linear axis by default, as the desktop');

const told = [];
const stop = first.onChartSettings((s) => told.push({ ...s }));
for (const [given, want] of [[0.6, 0.6], [1.5, 0.99], [-1, 0], ['abc', 0], [Infinity, 0], [0.99, 0.99], [0, 0]]) {
  first.changeChartSettings({ smoothing: given });
  check(first.chartSettings().smoothing === want, `smoothing ${String(given)} is kept as ${want}`);
}
const before = told.length;
first.changeChartSettings({ smoothing: 0 });
check(told.length === before, 'setting the same value again tells no one');
first.changeChartSettings({ log: true });
check(told.length === before + 1 && told[told.length - 1].log === true, 'a listener hears the change once');
stop();
first.changeChartSettings({ smoothing: 0.75 });
check(told.length === before + 1, 'a listener that stopped hears nothing more');

const second = await openPage();
check(second.chartSettings().smoothing === 0.75 && second.chartSettings().log === true, 'the next page reads the settings back');

for (const [key, value] of [['corrupt', '{not json'], ['out of range', '{"smoothing": 7, "log": "yes"}']]) {
  stored.set('ringmaster.charts', value);
  const page = await openPage();
  const s = page.chartSettings();
  check(s.smoothing >= 0 && s.smoothing <= 0.99 && typeof s.log === 'boolean', `a ${key} stored setting opens as ${JSON.stringify(s)}`);
}

for (const ranks of [0, 1, 2, 4, 7, 8]) check(first.defaultRanks(ranks) === 'all', `${ranks} ranks open on a line per rank`);
for (const ranks of [9, 16, 64, 1024]) check(first.defaultRanks(ranks) === 'band', `${ranks} ranks open on the band`);

console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
