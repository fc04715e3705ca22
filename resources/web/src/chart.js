// Step-axis charts over the series API: one uPlot per chart, fed by bucketed series (min, max, mean,
// last per bucket) for every rank, one rank or the min / median / max band. Dragging across a chart
// asks its owner for that step range; the owner re-queries with buckets = the plot's width in
// pixels, so a zoomed chart is always one bucket per pixel and spikes survive at any zoom.
// Every chart follows the shared view settings (chart_settings.js: smoothing with the raw line faint
// behind, a logarithmic y axis), and one hover line moves over every chart of the page at once.

import uPlot from './uPlot.esm.js';
import { getJson } from './api.js';
import { chartSettings, onChartSettings } from './chart_settings.js';
import { smoothEma } from './smoothing.js';

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
  '#7f7f7f', '#bcbd22', '#17becf'];

export function rankColor(index) {
  return PALETTE[index % PALETTE.length];
}

// A line's legend name, as the desktop names it: "rank 2" on a one-metric chart, "compute, rank 2"
// beside other metrics.
function lineLabel(metric, rank, several) {
  return several ? `${metric}, rank ${rank}` : `rank ${rank}`;
}

// The plot area's width in CSS pixels, clamped to the API's bucket range (1..4096).
export function bucketsFor(plot, fallbackWidth) {
  const width = plot ? plot.bbox.width / (window.devicePixelRatio || 1) : fallbackWidth;
  return Math.max(1, Math.min(4096, Math.round(width || 800)));
}

// Fetches `metric` for a ranks selection ("all", "band" or a rank number) over [from, to] and
// returns {bucket_width, lines: [{label, rank, points: Map(start -> {min, max, mean, median})}]};
// `label` names the metric in the legend (the metric's key by default).
export async function loadMetric(runId, metric, ranks, from, to, buckets, signal, label = metric) {
  const body = await getJson(`runs/${runId}/series`, {
    metric, ranks: String(ranks), from, to, buckets,
  }, signal);
  if (body.band) {
    const points = new Map();
    for (const [start, min, median, max] of body.band) points.set(start, { min, median, max, mean: median });
    return { bucket_width: body.bucket_width, band: true, lines: [{ label, metric: label, rank: null, points }] };
  }
  const lines = (body.ranks || []).map((r) => {
    const points = new Map();
    for (const [start, min, max, mean, last] of r.buckets) points.set(start, { min, max, mean, last });
    return { label: `${label}, rank ${r.rank}`, metric: label, rank: r.rank, points };
  });
  return { bucket_width: body.bucket_width, band: false, lines };
}

// Builds uPlot's aligned data and series from loaded metrics. `extra` adds point series (for
// instance validation loss at its eval steps): [{label, points: Map(step -> value), color}].
// Every line draws its buckets' mean at the bucket's start; a single rank's chart and the band
// also draw min and max with the range between them filled.
export function buildPlotData(loaded, extra = []) {
  const steps = new Set();
  for (const metric of loaded) for (const line of metric.lines) for (const s of line.points.keys()) steps.add(s);
  for (const e of extra) for (const s of e.points.keys()) steps.add(s);
  const xs = Float64Array.from([...steps].sort((a, b) => a - b));
  const data = [xs];
  const series = [{ label: 'step' }];
  const bands = [];
  const column = (points, pick) => Array.from(xs, (x) => {
    const p = points.get(x);
    return p === undefined ? null : pick(p);
  });
  let colorIndex = 0;
  // A chart's second metric (exposed communication beside compute, peak beside allocated) is dashed.
  // The range lines (min and max) are not smoothed: they show the spread the smoothing hides.
  const several = loaded.length > 1;
  for (const [metricIndex, metric] of loaded.entries()) {
    const dash = metricIndex > 0 ? [6, 4] : undefined;
    const withRange = metric.band || metric.lines.length === 1;
    for (const line of metric.lines) {
      const color = rankColor(line.rank ?? colorIndex);
      colorIndex += 1;
      const metricName = line.metric ?? line.label;
      const name = metric.band ? (several ? metricName : '') : lineLabel(metricName, line.rank, several);
      const rangeLabel = (what) => (metric.band ? [name, `${what} of ranks`].filter(Boolean).join(': ') : `${name}, ${what} in the bucket`);
      if (withRange) {
        const lowIndex = data.length;
        data.push(column(line.points, (p) => p.min));
        series.push({ label: rangeLabel('min'), stroke: color, width: 0.5, spanGaps: true, alpha: 0.6, smooth: false });
        data.push(column(line.points, (p) => p.max));
        series.push({ label: rangeLabel('max'), stroke: color, width: 0.5, spanGaps: true, alpha: 0.6, smooth: false });
        bands.push({ series: [lowIndex + 1, lowIndex], fill: `${color}33` });
      }
      data.push(column(line.points, (p) => (metric.band ? p.median : p.mean)));
      series.push({ label: metric.band ? rangeLabel('median') : name, stroke: color, width: 1.5, spanGaps: true, dash });
    }
  }
  for (const e of extra) {
    data.push(column(e.points, (v) => v));
    series.push({ label: e.label, stroke: e.color, width: 0, spanGaps: false, smooth: false, points: { show: true, size: 7, fill: e.color } });
  }
  return { data, series, bands };
}

// Performance marks for bench/web_first_chart.mjs, from uPlot's draw hook: 'ringmaster:first-chart'
// when the page's first chart has drawn data, and 'ringmaster:chart-drawn' (detail: the chart
// element's id) at each chart's first draw, with data or without (a metric with no points).
let firstChartMarked = false;
function markDrawn(chart, u) {
  if (!firstChartMarked && u.data[0].length > 0) {
    firstChartMarked = true;
    performance.mark('ringmaster:first-chart');
  }
  if (chart.drawnMarked) return;
  chart.drawnMarked = true;
  performance.mark('ringmaster:chart-drawn', { detail: chart.container.id || chart.title });
}

// Where each restarted attempt (launch.max_restarts) began, drawn over the plot: the earlier
// attempt's steps it ran again (rolled back) shaded, a dashed line at its first step.
function drawAttemptMarks(u, marks) {
  if (!marks || marks.length === 0) return;
  const { ctx } = u;
  const { left, top, width, height } = u.bbox;
  const x = (step) => u.valToPos(step, 'x', true);
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
  for (const mark of marks) {
    if (mark.rolledBack) {
      const from = x(mark.rolledBack[0] - 0.5);
      const to = x(mark.rolledBack[1] + 0.5);
      ctx.fillStyle = 'rgba(220, 60, 60, 0.16)';
      ctx.fillRect(from, top, Math.max(to - from, 1), height);
    }
    const at = x(mark.firstStep - 0.5);
    ctx.strokeStyle = '#782828';
    ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
    ctx.beginPath();
    ctx.moveTo(at, top);
    ctx.lineTo(at, top + height);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = '#782828';
    ctx.fillText(`attempt ${mark.attempt}`, at + 3 * devicePixelRatio, top + 12 * devicePixelRatio);
  }
  ctx.restore();
}

// The marks of a run's attempts (the run report's `attempts`), one per restart; the report says
// which steps each restart rolled back.
export function attemptMarks(attempts) {
  const marks = [];
  for (const a of (attempts || []).slice(1)) {
    if (a.first_step == null) continue;
    marks.push({ attempt: a.attempt, firstStep: a.first_step, rolledBack: a.rolled_back });
  }
  return marks;
}

// The charts' view of their data under the settings: each smoothed series (every line not marked
// `smooth: false`) replaced by its moving average, and on a log axis every value that is not
// positive left out (a logarithm has no place for it).
function viewData(data, series, { smoothing, log }) {
  const positive = (v) => (v !== null && v > 0 ? v : null);
  return data.map((column, index) => {
    if (index === 0) return column;
    const smoothed = smoothing > 0 && series[index].smooth !== false ? smoothEma(column, smoothing) : column;
    return log ? Array.from(smoothed, positive) : smoothed;
  });
}

// The raw line of each smoothed series, faint behind the smoothed one: drawn on the cleared canvas
// before uPlot draws the series, so it never has a legend entry or a hover value of its own.
function drawRawLines(u, raw, series, { smoothing, log }) {
  if (!(smoothing > 0) || !raw) return;
  const { ctx } = u;
  const { left, top, width, height } = u.bbox;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.globalAlpha = 0.25;
  ctx.lineWidth = devicePixelRatio;
  for (let i = 1; i < raw.length; i += 1) {
    if (series[i].smooth === false || !u.series[i] || !u.series[i].show || typeof series[i].stroke !== 'string') continue;
    ctx.strokeStyle = series[i].stroke;
    ctx.beginPath();
    let drawing = false;
    for (let j = 0; j < raw[0].length; j += 1) {
      const v = raw[i][j];
      if (v === null || v === undefined || !Number.isFinite(v) || (log && v <= 0)) continue;
      const x = u.valToPos(raw[0][j], 'x', true);
      const y = u.valToPos(v, 'y', true);
      if (drawing) ctx.lineTo(x, y);
      else ctx.moveTo(x, y);
      drawing = true;
    }
    ctx.stroke();
  }
  ctx.restore();
}

// A y tick's text with as many decimals as the ticks' spacing needs: uPlot's default keeps three,
// so ticks 0.0005 apart read "0.002, 0.002, 0.001". Very small or large values in exponent form.
// On a log axis (no one spacing: increment null) each tick is written on its own.
function tickText(value, increment) {
  if (value === null || value === undefined) return null;
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (!(increment > 0)) return abs >= 1e6 || abs < 1e-3 ? value.toExponential(0) : String(Number(value.toPrecision(3)));
  if (abs >= 1e6 || abs < 1e-4) return value.toExponential(Math.max(0, Math.min(6, Math.ceil(-Math.log10(increment / abs)))));
  const decimals = Math.max(0, Math.min(10, -Math.floor(Math.log10(increment) + 1e-9)));
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

// A legend value: '--' where the series has no point, the axis's format where it has one (bytes),
// else five significant digits (uPlot's default keeps three decimals: a learning rate of 3e-4
// read "0").
function legendText(value, yFormat) {
  if (value === null || value === undefined || Number.isNaN(value)) return '--';
  if (yFormat) return yFormat(value);
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e7)) return value.toExponential(3);
  return Number(value.toPrecision(5)).toLocaleString('en-US', { maximumFractionDigits: 6 });
}

// The y range over the lines drawn and the raw lines behind the smoothed ones, so smoothing
// never pushes a raw spike off the chart. uPlot's own padding rules, linear or logarithmic.
function yRange(u, min, max, raw, series, { smoothing, log }) {
  let low = min;
  let high = max;
  if (smoothing > 0 && raw) {
    for (let i = 1; i < raw.length; i += 1) {
      if (series[i].smooth === false || !u.series[i] || !u.series[i].show) continue;
      for (const v of raw[i]) {
        if (v === null || !Number.isFinite(v) || (log && v <= 0)) continue;
        if (low === null || v < low) low = v;
        if (high === null || v > high) high = v;
      }
    }
  }
  if (low === null || high === null) return log ? [1, 10] : [0, 1];
  return log ? uPlot.rangeLog(low, high, 10, true) : uPlot.rangeNum(low, high, 0.1, true);
}

// Every chart's cursor in one sync group: moving over one chart moves the hover line of every
// chart on the page to the same step, and each legend shows its values there.
const CURSOR_SYNC_KEY = 'ringmaster-steps';

// A chart card: a title, a uPlot, drag-to-zoom reported through onZoom(from, to), a double click
// through onReset(). update() replaces the data (and the series when their labels changed).
export class StepChart {
  // yFormat: the y axis's tick and legend text for a value (bytes for memory); numbers with the
  // decimals the ticks' spacing needs by default.
  // yLabel: the y axis's name (the chart's unit in words), none by default.
  // marks: attemptMarks() of the run, drawn over the lines.
  constructor(container, title, { onZoom, onReset, height = 220, yFormat = null, yLabel = '', marks = [] }) {
    this.yFormat = yFormat;
    this.yLabel = yLabel;
    this.marks = marks;
    this.container = container;
    this.title = title;
    this.onZoom = onZoom;
    this.onReset = onReset;
    this.height = height;
    this.plot = null;
    this.labels = '';
    this.drawnMarked = false;
    this.input = null;
    this.settings = chartSettings();
    this.stopSettings = onChartSettings((settings) => this.applySettings(settings));
  }

  width() {
    return Math.max(300, this.container.clientWidth - 8);
  }

  pointCount() {
    return this.plot ? this.plot.data[0].length : 0;
  }

  update({ data, series, bands }) {
    this.input = { data, series, bands };
    const labels = `${series.map((s) => s.label).join('|')}|log=${this.settings.log}`;
    if (this.plot && labels === this.labels) {
      this.plot.setData(viewData(data, series, this.settings));
      return;
    }
    if (this.plot) this.plot.destroy();
    this.labels = labels;
    this.plot = new uPlot(this.options(series, bands), viewData(data, series, this.settings), this.container);
    // What the plot draws, for a test to read: its y scale's kind (1 linear, 3 log) and smoothing.
    this.container.dataset.yDistr = String(this.plot.scales.y.distr);
    this.container.dataset.smoothing = String(this.settings.smoothing);
  }

  // New settings: the log axis makes a new plot (its scale's kind), smoothing only new data.
  applySettings(settings) {
    this.settings = settings;
    if (!this.input) return;
    this.update(this.input);
    this.container.dataset.smoothing = String(settings.smoothing);
  }

  options(series, bands) {
    const self = this;
    const yAxis = this.yFormat
      ? { size: 70, values: (u, ticks) => ticks.map(this.yFormat) }
      : { size: 60, values: (u, ticks, axis, space, increment) => ticks.map((v) => tickText(v, u.scales.y.distr === 3 ? null : increment)) };
    if (this.yLabel) yAxis.label = this.settings.log ? `${this.yLabel} (log)` : this.yLabel;
    return {
      title: this.title,
      width: this.width(),
      height: this.height,
      series: series.map((s, i) => (i === 0 || s.value ? s : { ...s, value: (u, v) => legendText(v, self.yFormat) })),
      bands,
      scales: {
        x: { time: false },
        y: { distr: this.settings.log ? 3 : 1, range: (u, min, max) => yRange(u, min, max, self.input && self.input.data, series, self.settings) },
      },
      axes: [{ label: 'step' }, yAxis],
      legend: { live: true },
      cursor: {
        sync: { key: CURSOR_SYNC_KEY },
        drag: { x: true, y: false, setScale: false },
        bind: {
          dblclick: () => () => {
            if (self.onReset) self.onReset();
            return null;
          },
        },
      },
      hooks: {
        drawClear: [(u) => drawRawLines(u, self.input && self.input.data, series, self.settings)],
        draw: [(u) => drawAttemptMarks(u, self.marks), (u) => markDrawn(self, u)],
        setSelect: [(u) => {
          if (u.select.width < 3) return;
          const from = Math.floor(u.posToVal(u.select.left, 'x'));
          const to = Math.ceil(u.posToVal(u.select.left + u.select.width, 'x'));
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
          if (self.onZoom && to > from) self.onZoom(Math.max(0, from), to);
        }],
      },
    };
  }

  resize() {
    if (this.plot) this.plot.setSize({ width: this.width(), height: this.height });
  }

  destroy() {
    this.stopSettings();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}
