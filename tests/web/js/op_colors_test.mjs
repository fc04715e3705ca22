// "Communication by op" draws each op in its own colour (issue 33: recv and all_reduce were both
// blue). Every op the engine names (engine/comm/comm_op.cpp's toString) must have a fixed colour of
// its own, none shared; an op the table does not know still gets the same colour every time.
//
// node op_colors_test.mjs SRC_DIR (resources/web/src) COMM_OP_CPP (engine/comm/comm_op.cpp)

import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [source, commOps] = process.argv.slice(2);
if (!source || !commOps) {
  console.log('usage: node op_colors_test.mjs SRC_DIR COMM_OP_CPP');
  process.exit(2);
}
const { opColor } = await import(pathToFileURL(path.resolve(source, 'op_colors.js')).href);

const failures = [];
function check(condition, message) {
  if (!condition) failures.push(message);
  console.log(`${condition ? 'ok' : 'FAIL'}: ${message}`);
}

// The names toString(CommOp) returns, read from its source so that a new op is tested too.
const text = fs.readFileSync(commOps, 'utf8');
const body = text.slice(text.indexOf('toString(CommOp'), text.indexOf('busFactor'));
const engineOps = [...body.matchAll(/return "([a-z_]+)";/g)].map((m) => m[1]);
check(engineOps.length >= 11 && engineOps.includes('all_reduce') && engineOps.includes('recv'),
  `read the engine's ops: ${engineOps.join(', ')}`);

const colors = engineOps.map((op) => opColor(op));
const byColor = new Map();
engineOps.forEach((op, i) => byColor.set(colors[i], [...(byColor.get(colors[i]) || []), op]));
const shared = [...byColor.values()].filter((ops) => ops.length > 1);
check(shared.length === 0, `every engine op has a colour of its own${shared.length ? `; shared: ${JSON.stringify(shared)}` : ''}`);
check(colors.every((c) => /^#[0-9a-f]{6}$/.test(c)), 'each is a #rrggbb colour');
check(engineOps.every((op) => opColor(op) === opColor(op)), 'the same op gets the same colour every time');
check(opColor('my_collective') === opColor('my_collective') && /^#[0-9a-f]{6}$/.test(opColor('my_collective')),
  'an op outside the table gets a stable colour too');

console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
