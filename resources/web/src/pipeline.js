// The pipeline page: one step's measured schedule as a Gantt (each rank's F / B / W actions on
// rank 0's clock, the wait for input and its transfer drawn inside each action) beside the
// planned schedule (the engine's plan played with unit costs) and the planned schedule replayed
// with the step's measured stage costs, with each rank's bubble, the step's, and the gap between
// planned and measured split into stage imbalance and runtime overhead. Bars are coloured by
// micro-batch and rows named by stage, as the desktop's Gantt (ui/widgets/gantt_chart.cpp). The
// URL names the run and the step; the newest step follows live data until one is picked.

import { getJson, onStream } from './api.js';
import { el, table, num, errorBox } from './dom.js';
import { replaceParams } from './route.js';

// The desktop's micro-batch palette (microBatchColor in ui/widgets/gantt_chart.cpp): a forward
// lighter (Qt's lighter(125)), a backward darker (darker(135)), a weight gradient as it is and hatched.
const MICRO_BATCH_PALETTE = [[0x4e, 0x79, 0xa7], [0xf2, 0x8e, 0x2b], [0x59, 0xa1, 0x4f], [0xe1, 0x57, 0x59],
  [0x76, 0xb7, 0xb2], [0xed, 0xc9, 0x48], [0xb0, 0x7a, 0xa1], [0x9c, 0x75, 0x5f], [0xff, 0x9d, 0xa7], [0xba, 0xb0, 0xac]];

function microBatchColor(microBatch, phase) {
  const rgb = MICRO_BATCH_PALETTE[Math.max(Number(microBatch) || 0, 0) % MICRO_BATCH_PALETTE.length];
  if (phase === 'F') return cssColor(scaleValue(rgb, 1.25));
  if (phase === 'B') return cssColor(scaleValue(rgb, 1 / 1.35));
  return cssColor(rgb);
}

// Qt's QColor::lighter / darker: the HSV value scaled; a value past 255 is clipped and the excess
// taken from the saturation instead.
function scaleValue([r, g, b], factor) {
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  let hue = 0;
  if (max !== min) {
    const d = max - min;
    if (max === r) hue = ((g - b) / d + 6) % 6;
    else if (max === g) hue = (b - r) / d + 2;
    else hue = (r - g) / d + 4;
  }
  let saturation = max === 0 ? 0 : (255 * (max - min)) / max;
  let value = max * factor;
  if (value > 255) {
    saturation = Math.max(0, saturation - (value - 255));
    value = 255;
  }
  const chroma = (value * saturation) / 255;
  const x = chroma * (1 - Math.abs((hue % 2) - 1));
  const m = value - chroma;
  const [r1, g1, b1] = [[chroma, x, 0], [x, chroma, 0], [0, chroma, x], [0, x, chroma], [x, 0, chroma], [chroma, 0, x]][Math.floor(hue) % 6];
  return [r1 + m, g1 + m, b1 + m].map((c) => Math.round(Math.min(255, Math.max(0, c))));
}

function cssColor([r, g, b]) {
  return `rgb(${r}, ${g}, ${b})`;
}

// A Gantt row's name: the stage it runs (stage r on rank r), or its rank where a rank holds
// several stages (an interleaved schedule: some action's chunk is past 0), as the desktop names it.
function rowNamer(bars) {
  const interleaved = bars.some((b) => (b.chunk || 0) > 0);
  return (row) => (interleaved ? `rank ${row}` : `stage ${row} (rank ${row})`);
}

export function mount(root, route) {
  const runId = Number(route.path[1]);
  let step = route.params.get('step') || '';
  const stepSelect = el('select', { id: 'pipeline-step', onchange: () => { step = stepSelect.value; follow = false; saveUrl(); loadStep(); } });
  const content = el('div', { class: 'pipeline' });
  root.append(el('h1', {}, el('a', { href: `#/run/${runId}` }, `Run ${runId}`), ': pipeline schedule'),
    el('div', { class: 'toolbar' }, el('label', {}, 'Step ', stepSelect)), content);
  let follow = step === '';
  let steps = [];

  function saveUrl() {
    replaceParams(new URLSearchParams({ step }));
  }

  async function loadSteps() {
    const body = await getJson(`runs/${runId}/schedule/steps`);
    steps = body.steps || [];
    stepSelect.replaceChildren(...steps.map((s) => el('option', { value: String(s) }, String(s))));
    if (steps.length === 0) {
      content.replaceChildren(el('p', { class: 'muted' }, 'No pipeline schedule recorded for this run (not a pipeline job, or no step yet).'));
      return false;
    }
    if (follow || !steps.includes(Number(step))) step = String(steps[steps.length - 1]);
    stepSelect.value = step;
    return true;
  }

  async function loadStep() {
    try {
      const body = await getJson(`runs/${runId}/schedule`, { step });
      render(body);
    } catch (error) {
      content.replaceChildren(errorBox(error));
    }
  }

  function render(body) {
    const measured = body.measured || {};
    const planned = body.planned || null;
    const bars = measuredBars(measured);
    const planBars = planned ? plannedBars(planned) : [];
    const rowName = rowNamer(bars.concat(planBars));
    const parts = [
      el('div', { class: 'figures' },
        figure('Measured bubble, this step', pct(measured.bubble_fraction)),
        figure('Measured bubble, run mean', pct(body.mean_bubble_fraction)),
        planned ? figure('Planned bubble', pct(planned.bubble_fraction)) : null,
        planned && planned.theoretical_bubble !== undefined ? figure('Textbook bubble', pct(planned.theoretical_bubble)) : null),
      ganttLegend(bars.concat(planBars)),
      el('div', { class: 'gantt-pair' },
        el('div', { class: 'gantt-box', id: 'gantt-measured' }, el('h2', {}, `Measured, step ${measured.step ?? step} (ms)`), gantt(bars, 1000, 'ms', rowName)),
        planned ? el('div', { class: 'gantt-box', id: 'gantt-planned' }, el('h2', {}, 'Planned (unit costs)'), gantt(planBars, 1, 'unit', rowName)) : null,
        replayedBox(body.replayed, rowName)),
    ];
    if (body.split) parts.splice(1, 0, splitLine(body.split));
    if (measured.ranks && measured.ranks.length) {
      parts.push(el('h2', {}, 'Bubbles by stage'), table([
        { title: 'Stage', value: (r) => rowName(r.rank) },
        { title: 'Busy ms', class: 'num', value: (r) => num(r.busy_us / 1000, 2) },
        { title: 'Transfer ms', class: 'num', value: (r) => num(r.transfer_us / 1000, 2) },
        { title: 'Wait ms', class: 'num', value: (r) => num(r.wait_us / 1000, 2) },
        { title: 'Bubble', class: 'num', value: (r) => pct(r.bubble_fraction) },
      ], measured.ranks));
    }
    content.replaceChildren(...parts.filter(Boolean));
  }

  let timer = null;
  const unsubscribe = onStream('run', (event) => {
    if (event.id !== runId || !follow || timer) return;
    timer = setTimeout(async () => {
      timer = null;
      try {
        if (await loadSteps()) await loadStep();
      } catch (error) {
        content.replaceChildren(errorBox(error));
      }
    }, 1000);
  });
  loadSteps().then((any) => { if (any) { saveUrl(); return loadStep(); } return null; })
    .catch((error) => content.replaceChildren(errorBox(error)));
  return () => {
    unsubscribe();
    clearTimeout(timer);
  };
}

// The three bubbles and the gap's split in words (the server's sentence, as the desktop shows it).
function splitLine(split) {
  const gap = 100 * (split.measured - split.planned);
  return el('p', { id: 'bubble-split', class: 'bubble-split' },
    `Bubble: measured ${pct(split.measured)} · planned with measured costs ${pct(split.replayed)} · `
    + `planned (unit costs) ${pct(split.planned)}. The gap of ${gap.toFixed(1)} pts is ${split.text}.`);
}

// "Planned with measured costs": the planned schedule replayed with the step's stage costs (µs).
function replayedBox(replayed, rowName) {
  if (!replayed) return null;
  const bars = (replayed.actions || []).map((a) => ({
    row: a.rank, phase: a.phase, micro_batch: a.micro_batch, start: a.start_us, ready: a.start_us, transfer: 0, end: a.end_us,
  }));
  return el('div', { class: 'gantt-box', id: 'gantt-replayed' },
    el('h2', {}, 'Planned with measured costs (ms)'), gantt(bars, 1000, 'ms', rowName));
}

function pct(value) {
  return value === undefined || value === null ? '–' : `${(100 * value).toFixed(1)} %`;
}

function figure(label, value) {
  return el('div', { class: 'figure' }, el('span', { class: 'label' }, label), el('span', { class: 'value' }, value));
}

// Measured actions -> bars {row, phase, micro_batch, start, ready, transfer, end} in µs from the
// step's start (its first compute): a stage that reached an action before that waited outside the
// step's span, so its wait is drawn from the span's start, as the desktop draws it.
function measuredBars(measured) {
  const origin = measured.start_us ?? Math.min(...(measured.actions || []).map((a) => a.start_us));
  return (measured.actions || []).map((a) => ({
    row: a.rank, phase: a.phase, micro_batch: a.micro_batch, chunk: a.chunk,
    start: Math.max(0, a.start_us - origin), ready: Math.max(0, (a.ready_us ?? a.start_us) - origin),
    transfer: a.transfer_us || 0, end: Math.max(0, a.end_us - origin),
  }));
}

// The planned schedule's actions [{rank, phase, micro_batch, chunk, start, end}] (unit costs).
function plannedBars(planned) {
  return (planned.actions || []).map((a) => ({
    row: a.rank, phase: a.phase, micro_batch: a.micro_batch, chunk: a.chunk, start: a.start, ready: a.start, transfer: 0, end: a.end,
  }));
}

// What the colours say: one swatch per micro-batch drawn (its weight-gradient colour), how the
// phases shade it, and the wait and transfer strips.
function ganttLegend(bars) {
  const microBatches = [...new Set(bars.map((b) => b.micro_batch).filter((m) => m !== undefined && m !== null))].sort((a, b) => a - b);
  const swatch = (color, text) => {
    const box = el('span', { class: 'swatch-box' });
    box.style.background = color;
    return el('span', { class: 'swatch-item' }, box, text);
  };
  return el('div', { class: 'legend', id: 'gantt-legend' },
    microBatches.slice(0, MICRO_BATCH_PALETTE.length).map((m) => swatch(microBatchColor(m, 'W'), `micro-batch ${m}`)),
    el('span', { class: 'muted' }, 'F lighter, B darker, W hatched'),
    el('span', { class: 'swatch wait' }, 'waiting for the other stage'), el('span', { class: 'swatch transfer' }, 'input transfer'));
}

// Diagonal white lines over a weight-gradient bar, as the desktop's BDiagPattern.
function hatch(ctx, x, y, w, h) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = 'rgba(255, 255, 255, 0.8)';
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let d = -h; d < w; d += 6) {
    ctx.moveTo(x + d, y + h);
    ctx.lineTo(x + d + h, y);
  }
  ctx.stroke();
  ctx.restore();
}

// A Gantt on a canvas: one row per stage, each action a bar coloured by its micro-batch and
// shaded by its phase, the wait before its input arrived in grey and the transfer in dark grey.
function gantt(bars, scale, unit, rowName) {
  if (bars.length === 0) return el('p', { class: 'muted' }, 'No actions.');
  const rows = Math.max(...bars.map((b) => b.row)) + 1;
  const span = Math.max(...bars.map((b) => b.end)) || 1;
  const width = 520;
  const left = 104;
  const rowHeight = 24;
  const canvas = el('canvas', { width: width + left + 10, height: rows * rowHeight + 24, class: 'gantt' });
  const ctx = canvas.getContext('2d');
  const x = (t) => left + (t / span) * width;
  ctx.font = '11px sans-serif';
  ctx.textBaseline = 'middle';
  for (let r = 0; r < rows; r += 1) {
    ctx.fillStyle = '#333';
    ctx.fillText(rowName(r), 4, r * rowHeight + rowHeight / 2);
  }
  for (const b of bars) {
    const y = b.row * rowHeight + 2;
    const h = rowHeight - 4;
    const transferStart = Math.max(b.start, b.ready - b.transfer);
    if (transferStart > b.start) {
      ctx.fillStyle = '#dddddd';
      ctx.fillRect(x(b.start), y + h / 3, x(transferStart) - x(b.start), h / 3);
    }
    if (b.ready > transferStart) {
      ctx.fillStyle = '#888888';
      ctx.fillRect(x(transferStart), y + h / 3, x(b.ready) - x(transferStart), h / 3);
    }
    const barWidth = Math.max(1, x(b.end) - x(b.ready));
    ctx.fillStyle = microBatchColor(b.micro_batch, b.phase);
    ctx.fillRect(x(b.ready), y, barWidth, h);
    if (b.phase === 'W') hatch(ctx, x(b.ready), y, barWidth, h);
    ctx.strokeStyle = '#ffffff';
    ctx.strokeRect(x(b.ready), y, barWidth, h);
    if (x(b.end) - x(b.ready) > 14) {
      ctx.fillStyle = b.phase === 'B' ? '#fff' : '#000';
      ctx.fillText(`${b.phase}${b.micro_batch}`, x(b.ready) + 2, y + h / 2);
    }
  }
  ctx.fillStyle = '#333';
  ctx.fillText(`0 – ${num(span / scale, 2)} ${unit}`, left, rows * rowHeight + 12);
  return canvas;
}
