// One colour per collective op, the same on every chart and every run ("Communication by op"): the
// known ops in a fixed order over eleven distinct colours, any other op by its name's hash. No DOM,
// so node tests it on its own (tests/web/js/).

const TAB10 = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
  '#7f7f7f', '#bcbd22', '#17becf'];

// The engine's ops (engine/comm/comm_op.cpp's names), the common ones first.
export const KNOWN_OPS = ['all_reduce', 'send', 'recv', 'all_gather', 'reduce_scatter', 'broadcast', 'barrier',
  'reduce', 'all_to_all', 'gather', 'scatter'];
const KNOWN_COLORS = [...TAB10, '#000000'];

export function opColor(op) {
  const known = KNOWN_OPS.indexOf(op);
  if (known >= 0) return KNOWN_COLORS[known];
  let hash = 0;
  for (const c of String(op)) hash = (hash * 31 + c.codePointAt(0)) >>> 0;
  return TAB10[hash % TAB10.length];
}
