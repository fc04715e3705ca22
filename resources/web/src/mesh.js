// Ranks grouped and ordered by their device-mesh coordinates ({dp, tp, pp}), as the desktop's
// ui/data/rank_groups.h does: rank order, by pp stage, by dp replica, or by tp group (the ranks
// that differ only in tp). The heat map and the rank table of the run page use it.

export const GROUPINGS = [
  ['rank', 'rank order'],
  ['pp', 'by pp stage'],
  ['dp', 'by dp replica'],
  ['tp', 'by tp group'],
];

function sortKey(c, grouping) {
  if (grouping === 'pp') return [c.pp, 0, c.dp, c.tp];
  if (grouping === 'dp') return [c.dp, 0, c.pp, c.tp];
  if (grouping === 'tp') return [c.pp, c.dp, c.tp, 0];
  return [0, 0, 0, 0];
}

function groupLabel(c, grouping) {
  if (grouping === 'pp') return `pp stage ${c.pp}`;
  if (grouping === 'dp') return `dp replica ${c.dp}`;
  if (grouping === 'tp') return `tp group dp ${c.dp} · pp ${c.pp}`;
  return 'all ranks';
}

function compareKeys(a, b) {
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

// coords: [{dp, tp, pp}] by rank. The groups [{label, ranks}] in order, each group's ranks ordered
// by the other coordinates (pp, dp, then tp), then rank.
export function groupRanks(coords, grouping) {
  const ranks = coords.map((_, rank) => rank);
  ranks.sort((a, b) => compareKeys(sortKey(coords[a], grouping), sortKey(coords[b], grouping)) || a - b);
  const groups = [];
  for (const rank of ranks) {
    const label = groupLabel(coords[rank], grouping);
    if (groups.length === 0 || groups[groups.length - 1].label !== label) groups.push({ label, ranks: [] });
    groups[groups.length - 1].ranks.push(rank);
  }
  return groups;
}

// `rank`'s coordinates on `mesh` ({dp, tp, pp}) by the engine's rank order: tp fastest, then dp,
// then pp (spec/mesh_layout.h).
export function meshCoordinates(mesh, rank) {
  return { dp: Math.floor(rank / mesh.tp) % mesh.dp, tp: rank % mesh.tp, pp: Math.floor(rank / (mesh.tp * mesh.dp)) };
}

export function coordsText(c) {
  return c ? `dp ${c.dp} · tp ${c.tp} · pp ${c.pp}` : '–';
}
