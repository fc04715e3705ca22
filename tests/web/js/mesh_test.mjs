// Issue 34: the run page's rank grouping (resources/web/src/mesh.js) against the desktop's rule
// (ui/data/rank_groups.h, tested in tests/ui/ui_rank_groups_test.cpp): over every dp x tp x pp
// layout of 1 to 8 ranks (rank = tp + T * (dp + D * pp)) and every grouping, the groups partition
// the ranks by the shared coordinate, come in that coordinate's order, and keep rank order inside.
//
// node mesh_test.mjs SRC_DIR (resources/web/src)
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const source = process.argv[2];
if (!source) {
  console.log('usage: node mesh_test.mjs SRC_DIR');
  process.exit(2);
}
const { GROUPINGS, groupRanks, coordsText, meshCoordinates } = await import(pathToFileURL(path.resolve(source, 'mesh.js')).href);

let failures = 0;
function check(condition, message) {
  if (!condition) {
    failures += 1;
    console.log(`FAIL: ${message}`);
  }
}

function coordinates(dp, tp, pp) {
  return Array.from({ length: dp * tp * pp }, (_, rank) => meshCoordinates({ dp, tp, pp }, rank));
}

// The coordinate a group shares, in the order groups come.
const shared = { rank: () => [0], pp: (c) => [c.pp], dp: (c) => [c.dp], tp: (c) => [c.pp, c.dp] };
const expectedCount = { rank: () => 1, pp: (m) => m.pp, dp: (m) => m.dp, tp: (m) => m.dp * m.pp };

function lexicallyBefore(a, b) {
  const at = a.findIndex((v, i) => v !== b[i]);
  return at >= 0 && a[at] < b[at];
}

let layouts = 0;
for (let dp = 1; dp <= 8; dp += 1) {
  for (let tp = 1; dp * tp <= 8; tp += 1) {
    for (let pp = 1; dp * tp * pp <= 8; pp += 1) {
      layouts += 1;
      const coords = coordinates(dp, tp, pp);
      for (const [grouping] of GROUPINGS) {
        const where = `dp ${dp} tp ${tp} pp ${pp}, ${grouping}`;
        const groups = groupRanks(coords, grouping);
        check(groups.length === expectedCount[grouping]({ dp, tp, pp }), `${where}: ${groups.length} groups`);
        const all = groups.flatMap((g) => g.ranks).sort((a, b) => a - b);
        check(all.length === coords.length && all.every((r, i) => r === i), `${where}: every rank once`);
        check(new Set(groups.map((g) => g.label)).size === groups.length, `${where}: distinct labels`);
        let previous = null;
        for (const group of groups) {
          const key = shared[grouping](coords[group.ranks[0]]).join(',');
          check(group.ranks.every((r) => shared[grouping](coords[r]).join(',') === key), `${where}: ${group.label} shares its coordinate`);
          check(group.ranks.every((r, i) => i === 0 || group.ranks[i - 1] < r), `${where}: ${group.label} in rank order`);
          const keyValues = shared[grouping](coords[group.ranks[0]]);
          if (previous) check(lexicallyBefore(previous, keyValues), `${where}: groups in order`);
          previous = keyValues;
        }
      }
    }
  }
}
// The engine's rank order (rank = tp + T * (dp + D * pp)), every coordinate once.
const seen = new Set(coordinates(2, 2, 2).map((c) => `${c.dp}${c.tp}${c.pp}`));
check(seen.size === 8 && JSON.stringify(meshCoordinates({ dp: 2, tp: 2, pp: 2 }, 5)) === '{"dp":0,"tp":1,"pp":1}', 'the rank order: tp fastest, then dp, then pp');
// The desktop's labels, word for word.
const dpPp = groupRanks(coordinates(2, 1, 2), 'dp');
check(dpPp[0].label === 'dp replica 0' && dpPp[0].ranks.join() === '0,2' && dpPp[1].ranks.join() === '1,3', `dp 2 x pp 2 by replica: ${JSON.stringify(dpPp)}`);
check(groupRanks(coordinates(2, 2, 1), 'tp')[0].label === 'tp group dp 0 · pp 0', 'a tp group\'s label');
check(coordsText({ dp: 1, tp: 1, pp: 0 }) === 'dp 1 · tp 1 · pp 0', 'coordinates as text');

console.log(`${layouts} layouts x ${GROUPINGS.length} groupings, ${failures} failure(s)`);
process.exit(failures ? 1 : 0);
