// The web charts' smoothing (resources/web/src/smoothing.js) against a slow, obvious reference:
// the debiased moving average written as its weighted sum, smoothed_t = Σ_k (1 - w) w^(t-k) v_k /
// (1 - w^(t+1)) over the finite values k ≤ t. Swept over weights (0, small, TensorBoard's 0.6, the
// slider's 0.99) and series with gaps (null), NaN and infinities, one point, none and constant
// ones; the values that are not finite must pass through where they were. Issue 33.
//
// node smoothing_test.mjs SRC_DIR (resources/web/src)

import path from 'node:path';
import { pathToFileURL } from 'node:url';

const source = process.argv[2];
if (!source) {
  console.log('usage: node smoothing_test.mjs SRC_DIR');
  process.exit(2);
}
const { smoothEma } = await import(pathToFileURL(path.resolve(source, 'smoothing.js')).href);

const failures = [];
function check(condition, message) {
  if (!condition) failures.push(message);
  console.log(`${condition ? 'ok' : 'FAIL'}: ${message}`);
}

function reference(values, weight) {
  const finite = values.map((v, i) => [v, i]).filter(([v]) => typeof v === 'number' && Number.isFinite(v));
  if (weight <= 0 || finite.length === 0 || values.every((v) => v === values[0])) return values.slice();
  const out = values.slice();
  finite.forEach(([, index], t) => {
    let sum = 0;
    for (let k = 0; k <= t; k += 1) sum += (1 - weight) * weight ** (t - k) * finite[k][0];
    out[index] = sum / (1 - weight ** (t + 1));
  });
  return out;
}

// A fixed pseudo-random walk, so a failure is the same on every run.
function walk(n, seed) {
  let x = seed;
  let v = 3;
  return Array.from({ length: n }, () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    v += (x / 2147483648 - 0.5) * 0.2;
    return v;
  });
}

const series = {
  empty: [],
  one: [2.5],
  constant: [1, 1, 1, 1],
  'all null': [null, null],
  walk: walk(200, 7),
  'with gaps': [5, null, 4, null, null, 3, 2.5, null],
  'not finite': [1, NaN, 2, Infinity, 3, -Infinity, 4],
  'leading gap': [null, NaN, 10, 0, 10, 0],
  negative: [-1, 2, -3, 4, -5],
};

for (const weight of [0, 0.1, 0.6, 0.99]) {
  for (const [name, values] of Object.entries(series)) {
    const got = smoothEma(values, weight);
    const want = reference(values, weight);
    let worst = 0;
    let first = -1;
    let sameShape = got.length === want.length;
    for (let i = 0; i < want.length && sameShape; i += 1) {
      const a = got[i];
      const b = want[i];
      if (typeof b !== 'number' || !Number.isFinite(b)) {
        if (!Object.is(a, b)) sameShape = false;
        continue;
      }
      const error = Math.abs(a - b) / Math.max(1, Math.abs(b));
      if (error > worst) worst = error;
      if (error > 1e-12 && first < 0) first = i;
    }
    check(sameShape && first < 0, `weight ${weight}, ${name}: worst relative error ${worst.toExponential(1)}${first >= 0 ? `, first at ${first}: ${got[first]} against ${want[first]}` : ''}${sameShape ? '' : ' (a value that is not finite moved)'}`);
  }
}

// The debiasing: the first point is the value itself (not pulled to zero), at any weight.
check(smoothEma([8, 0], 0.9)[0] === 8, 'the first smoothed point is the first value');
// Smoothing never changes its input or its length.
const input = [3, 1, null, 2];
const before = JSON.stringify(input);
check(smoothEma(input, 0.5).length === 4 && JSON.stringify(input) === before, 'the input is left as it was');
// A typed array (uPlot's x column type) smooths as a plain array does.
check(JSON.stringify(smoothEma(Float64Array.from([1, 2, 3]), 0.5)) === JSON.stringify(smoothEma([1, 2, 3], 0.5)), 'a typed array smooths as an array');
// Heavier smoothing moves a step less: after a jump from 0 to 1, the weight-0.99 line stays lower.
const jump = [0, 0, 0, 0, 1, 1, 1, 1];
check(smoothEma(jump, 0.99)[5] < smoothEma(jump, 0.6)[5], 'a heavier weight follows a jump more slowly');

console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
