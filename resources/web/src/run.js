// The run page: a run's figures and its tabs. Charts (the chart table the desktop reads too, from
// /api/v1/charts: loss with validation loss, step time, communication, memory, learning rate,
// gradient norm, the fp16 loss scale, ..., and a chart per metric of the run's own, in collapsible
// panels by the name's prefix), each for every rank, one rank or the min / median / max band
// (communication by op: the mean over ranks, or one rank's, as the desktop), zoomed by dragging (a re-query at one bucket per pixel);
// the rank table with stragglers; communication statistics by mesh dimension (a table, and a chart
// per rank: comm_dims.js), by op and by rank, the rank table, heat map and per-dimension chart
// grouped by the ranks' mesh coordinates (mesh.js); logs with filters;
// flight-recorder dumps. The URL names the run, the tab, the ranks and the step range, and new
// data from the stream redraws the open tab (at most every 500 ms).

import { getJson, onStream } from './api.js';
import { el, table, num, bytes, duration, time, statusBadge, errorBox, lossFigureName } from './dom.js';
import { replaceParams } from './route.js';
import { StepChart, loadMetric, buildPlotData, bucketsFor, attemptMarks } from './chart.js';
import { opColor } from './op_colors.js';
import { chartControls, defaultRanks } from './chart_settings.js';
import { figureLabel, formatFigure, figureColumn } from './figures.js';
import { organisePanel, deletedNotice } from './organise.js';
import { GROUPINGS, groupRanks, coordsText, meshCoordinates } from './mesh.js';
import { dimsTable, drawDimsChart } from './comm_dims.js';
import { schedulerLine } from './scheduler.js';
import { sweepOfRunLine } from './sweep.js';

const TABS = [['charts', 'Charts'], ['ranks', 'Ranks'], ['comm', 'Communication'], ['logs', 'Logs'], ['flight', 'Flight recorder']];

// The charts come from the server's chart table (GET /api/v1/charts?run=ID: the desktop's list, the
// charts that apply to this run and one per metric of its own, each with its panel: the metric
// name's prefix before '/', "" the default one); a chart is drawn when the run recorded one of its
// metrics. A collapsed panel's charts are not read until it is opened again.
// `comm_by_op` draws the communication events instead (/comm/series), one line per collective op;
// a chart whose `every_rank` is 'band' draws the band when every rank is chosen.

// The y axis's name: the unit in words (the memory axis's ticks say their bytes themselves).
const AXIS_NAMES = { bytes: 'memory', lr: 'learning rate' };
function axisName(spec) {
  return AXIS_NAMES[spec.unit] ?? spec.unit ?? '';
}

// A chart's heading: its title with the unit, unless the title says it ("Loss", "Learning rate")
// or the axis formats it (bytes).
function chartTitle(spec) {
  const title = spec.title.toLowerCase();
  if (spec.unit === 'bytes' || !spec.unit || title.includes(spec.unit) || title.includes(axisName(spec))) return spec.title;
  return `${spec.title} (${spec.unit})`;
}

export function mount(root, route) {
  const runId = Number(route.path[1]);
  const state = {
    tab: route.params.get('tab') || 'charts',
    ranks: route.params.get('ranks') || '',
    from: route.params.get('from') || '',
    to: route.params.get('to') || '',
    logRank: route.params.get('log_rank') || '',
    logLevel: route.params.get('log_level') || '',
    logContains: route.params.get('log_contains') || '',
    grouping: route.params.get('grouping') || 'rank',
  };
  if (!Number.isInteger(runId) || runId <= 0) {
    root.append(errorBox(`'${route.path[1] ?? ''}' is not a run id.`));
    return null;
  }

  const header = el('div', { class: 'run-header' });
  const sweepLine = sweepOfRunLine(runId);  // issue 37: the sweep the run belongs to, if any
  const organise = el('div', { class: 'run-organise' });
  const tabs = el('div', { class: 'tabs' });
  const body = el('div', { class: 'tab-body' });
  root.append(header, organise, tabs, body);

  let detail = null;
  let chartList = [];
  let defaultPanel = 'Charts';
  const collapsed = new Set();  // the panels closed on this page, kept across redraws
  let unmountTab = null;
  let refreshTab = null;
  let destroyed = false;

  function saveUrl() {
    replaceParams(new URLSearchParams({
      tab: state.tab, ranks: state.ranks, from: state.from, to: state.to,
      log_rank: state.logRank, log_level: state.logLevel, log_contains: state.logContains,
      grouping: state.grouping,
    }));
  }

  function renderHeader() {
    const r = detail.run;
    const s = detail;
    header.replaceChildren(
      el('h1', {}, `Run ${r.id}: ${r.name} `, statusBadge(r.status)),
      schedulerLine(r),
      sweepLine,
      el('div', { class: 'figures' },
        figure('Strategy', r.strategy), figure('Ranks', r.world_size),
        // The summary's figures by their names in the table of figures (figures.js); the loss is
        // "final" only for a completed run.
        figure(figureLabel('final_step'), formatFigure('final_step', s.final_step)),
        s.final_loss === undefined || s.final_loss === null ? null : figure(lossFigureName(r.status), num(s.final_loss, 4)),
        ['samples_per_second', 'mean_step_ms', 'comm_share']
          .map((id) => figure(figureLabel(id), formatFigure(id, s[id]))),
        figure('Started', time(r.started_at)), figure(figureLabel('duration_s'), duration(r.duration_s)),
        s.bubble_fraction !== undefined && s.bubble_fraction !== null
          ? el('a', { class: 'figure link', href: `#/pipeline/${r.id}` }, el('span', { class: 'label' }, 'Pipeline'), el('span', { class: 'value' }, `bubbles ${(100 * s.bubble_fraction).toFixed(1)} %`))
          : null,
        rootCause(detail)),
      hangBanner(detail.hang && detail.hang.diagnoses),
      attemptList(detail.attempts),
    );
  }

  // The root cause of a failure, and the last lines its rank wrote on stderr (argparse's message,
  // a traceback's end: issue 33), as text nodes.
  function rootCause(report) {
    const r = report.run;
    if (!r.error) return null;
    const where = r.error_rank != null ? ` (rank ${r.error_rank})` : '';
    const output = report.error_output || [];
    return el('div', { class: 'error', id: 'root-cause' }, `root cause${where}: ${r.error}`,
      output.length ? el('pre', { class: 'error-output', id: 'error-output' }, output.join('\n')) : null);
  }

  // The live hang view: while the run runs, the collective some ranks wait in and who holds it up.
  function hangBanner(hangs) {
    if (!hangs || hangs.length === 0) return null;
    return el('div', { class: 'error', id: 'hang' }, hangs.map((h) => el('div', {}, `hang: ${h.message}`)));
  }

  // Restarts (launch.max_restarts): when each attempt began, where it resumed, what ended it.
  function attemptList(attempts) {
    if (!attempts || attempts.length < 2) return null;
    return el('ul', { class: 'attempts', id: 'attempts' }, attempts.map((a, i) => {
      let text = `attempt ${a.attempt}: began ${time(a.started_at)}`;
      if (a.first_step != null && a.last_step != null) text += `, steps ${a.first_step}–${a.last_step}`;
      if (i > 0 && a.first_step != null) text += a.first_step > 1 ? `, resumed from the checkpoint of step ${a.first_step - 1}` : ', started again from step 1';
      return el('li', {}, text, a.error ? el('div', { class: 'error' }, `root cause${a.error_rank != null ? ` (rank ${a.error_rank})` : ''}: ${a.error}`) : null);
    }));
  }

  function renderTabs() {
    tabs.replaceChildren(...TABS.map(([id, title]) => el('a', {
      href: '#', class: id === state.tab ? 'tab active' : 'tab', 'data-tab': id,
      onclick: (e) => { e.preventDefault(); state.tab = id; saveUrl(); renderTabs(); showTab(); },
    }, title)));
    tabs.append(el('a', { class: 'tab', href: `#/pipeline/${runId}` }, 'Pipeline'));
  }

  function showTab() {
    if (unmountTab) unmountTab();
    unmountTab = null;
    refreshTab = null;
    body.replaceChildren();
    const tab = { charts: chartsTab, ranks: ranksTab, comm: commTab, logs: logsTab, flight: flightTab }[state.tab] || chartsTab;
    const result = tab(body) || {};
    unmountTab = result.unmount || null;
    refreshTab = result.refresh || null;
  }

  // ---- Charts -------------------------------------------------------------------------------
  function chartsTab(container) {
    if (!state.ranks) state.ranks = defaultRanks(detail.run.world_size || 0);
    const controls = chartControls();
    const rankSelect = el('select', { id: 'ranks-select', onchange: () => { state.ranks = rankSelect.value; saveUrl(); reload(); } },
      el('option', { value: 'all' }, 'every rank'), el('option', { value: 'band' }, 'min / median / max band'),
      Array.from({ length: detail.run.world_size || 0 }, (_, rank) => el('option', { value: String(rank) }, `rank ${rank}`)));
    rankSelect.value = state.ranks;
    const rangeLabel = el('span', { class: 'muted', id: 'range-label' });
    const reset = el('button', { onclick: () => resetZoom() }, 'Whole run');
    container.append(el('div', { class: 'toolbar' }, el('label', {}, 'Ranks ', rankSelect), controls.element, reset, rangeLabel,
      el('span', { class: 'muted' }, 'Drag across a chart to zoom; double-click for the whole run.')));
    const available = new Set(detail.metrics || []);
    const charts = [];
    const panels = new Map();
    for (const spec of chartList) {
      const commByOp = spec.source === 'comm_by_op';
      const metrics = commByOp ? [] : spec.metrics.filter((m) => available.has(m.key));
      if (commByOp ? available.size === 0 : metrics.length === 0) continue;
      const panel = spec.panel || '';
      if (!panels.has(panel)) panels.set(panel, chartPanel(container, panel, () => reload()));
      const box = el('div', { class: 'chart', id: `chart-${spec.id}`, 'data-points': '0' });
      panels.get(panel).append(box);
      const yFormat = spec.unit === 'bytes' ? bytes : null;
      charts.push({ spec, metrics, box, panel, chart: new StepChart(box, chartTitle(spec), { onZoom: zoom, onReset: resetZoom, yFormat, yLabel: axisName(spec), marks: attemptMarks(detail.attempts) }) });
    }
    if (charts.length === 0) container.append(el('p', { class: 'muted' }, 'No step metrics recorded yet.'));
    let controller = null;

    function zoom(from, to) {
      state.from = String(from);
      state.to = String(to);
      saveUrl();
      reload();
    }
    function resetZoom() {
      state.from = '';
      state.to = '';
      saveUrl();
      reload();
    }

    async function reload() {
      if (controller) controller.abort();
      controller = new AbortController();
      const { signal } = controller;
      rangeLabel.textContent = state.from || state.to ? `steps ${state.from || 0} – ${state.to || 'end'}` : 'whole run';
      await Promise.all(charts.filter((c) => !collapsed.has(c.panel)).map(async (c) => {
        try {
          const buckets = bucketsFor(c.chart.plot, c.chart.width());
          if (c.spec.source === 'comm_by_op') {
            const byOp = await getJson(`runs/${runId}/comm/series`, {
              rank: /^\d+$/.test(state.ranks) ? state.ranks : '', from: state.from, to: state.to, buckets,
            }, signal);
            if (signal.aborted) return;
            c.chart.update(opPlotData(byOp));
            c.box.dataset.points = String(c.chart.pointCount());
            c.box.dataset.lines = String(byOp.ops.length);
            return;
          }
          const ranks = state.ranks === 'all' && c.spec.every_rank === 'band' ? 'band' : state.ranks;
          const loaded = await Promise.all(c.metrics.map((m) => loadMetric(runId, m.key, ranks, state.from, state.to, buckets, signal, m.label)));
          const extra = [];
          if (c.spec.validation_loss && detail.evals && detail.evals.length) {
            const from = state.from === '' ? -Infinity : Number(state.from);
            const to = state.to === '' ? Infinity : Number(state.to);
            const points = new Map(detail.evals.filter((e) => e.step >= from && e.step <= to && e.val_loss !== null).map((e) => [e.step, e.val_loss]));
            extra.push({ label: 'validation loss', points, color: '#000000' });
          }
          if (signal.aborted) return;
          c.chart.update(buildPlotData(loaded, extra));
          c.box.dataset.points = String(c.chart.pointCount());
        } catch (error) {
          if (error.name !== 'AbortError') c.box.replaceChildren(errorBox(error));
        }
      }));
    }

    const onResize = () => { for (const c of charts) c.chart.resize(); };
    window.addEventListener('resize', onResize);
    reload();
    return {
      refresh: reload,
      unmount: () => {
        window.removeEventListener('resize', onResize);
        controls.uninstall();
        if (controller) controller.abort();
        for (const c of charts) c.chart.destroy();
      },
    };
  }

  // A panel of charts: a collapsible section headed by its prefix (the default one's by
  // default_panel), open unless closed on this page; opening it reads its charts.
  function chartPanel(container, name, onOpen) {
    const body = el('div', { class: 'panel-charts' });
    const details = el('details', { class: 'panel', 'data-panel': name, open: !collapsed.has(name) },
      el('summary', {}, name || defaultPanel), body);
    // (Chromium fires toggle for the initial open too: only a change of state counts.)
    details.addEventListener('toggle', () => {
      if (details.open && collapsed.has(name)) {
        collapsed.delete(name);
        onOpen();
      } else if (!details.open) {
        collapsed.add(name);
      }
    });
    container.append(details);
    return body;
  }

  // ---- Ranks grouped by their mesh coordinates (mesh.js) ------------------------------------
  // Each rank's {dp, tp, pp}: as the report's rank rows have them, else (a rank not heard from
  // yet) by the run's mesh's rank order.
  function rankCoords() {
    const world = detail.run.world_size || 0;
    const byRank = new Map((detail.ranks || []).map((r) => [r.rank, r.coords]));
    const m = detail.run.mesh;
    const mesh = m && m.dp * m.tp * m.pp === world ? m : { dp: Math.max(world, 1), tp: 1, pp: 1 };
    return Array.from({ length: world }, (_, rank) => byRank.get(rank) || meshCoordinates(mesh, rank));
  }

  // The grouping control; `changed` redraws what it groups.
  function groupingSelect(changed) {
    const select = el('select', { id: 'rank-grouping', title: 'Group and order the ranks by their mesh coordinates (dp, tp, pp)',
      onchange: () => { state.grouping = select.value; saveUrl(); changed(); } },
    GROUPINGS.map(([value, label]) => el('option', { value }, `Ranks: ${label}`)));
    select.value = state.grouping;
    return select;
  }

  // ---- Ranks --------------------------------------------------------------------------------
  function ranksTab(container) {
    const list = el('div', {});
    container.append(el('div', { class: 'controls' }, groupingSelect(() => { list.replaceChildren(); rankList(list); })), list);
    rankList(list);
    return {};
  }

  function rankList(container) {
    const coords = rankCoords();
    const order = groupRanks(coords, state.grouping).flatMap((g) => g.ranks);
    const byRank = new Map((detail.ranks || []).map((r) => [r.rank, r]));
    const ranks = order.map((rank) => byRank.get(rank)).filter(Boolean);
    const stragglers = ranks.filter((r) => r.straggler).map((r) => r.rank);
    container.append(
      el('p', {}, stragglers.length ? `Stragglers: rank ${stragglers.join(', rank ')} (the others wait for them, or their compute stands out where no wait was measured).` : 'No straggler.'),
      table([
        { title: 'Rank', class: 'num', value: (r) => r.rank },
        { title: 'Host', value: (r) => r.host },
        { title: 'PID', class: 'num', value: (r) => r.pid ?? '–' },
        { title: 'Device', value: (r) => r.device_name || r.device || '–' },
        { title: 'Status', value: (r) => statusBadge(r.status) },
        { title: 'Waiting on', value: (r) => r.waiting_on ?? '' },
        ...['last_step', 'samples_per_second', 'tokens_per_second', 'mean_step_ms', 'mean_compute_ms',
          'mean_exposed_comm_ms', 'peak_memory']
          // Only for a model with tokens (issue 33): a run without them has no Tokens/s column.
          .filter((id) => id !== 'tokens_per_second' || ranks.some((r) => r.tokens_per_second != null))
          .map((id) => figureColumn(id)),
        { title: 'Straggler', value: (r) => (r.straggler ? 'yes' : '') },
        { title: 'Mesh', value: (r) => coordsText(coords[r.rank]) },
      ].filter(Boolean), ranks, (r) => ({ class: r.straggler ? 'straggler' : '', 'data-rank': r.rank })),
    );
    const ingest = detail.ingest;
    if (ingest) container.append(el('p', { class: 'muted' }, `Events: ${num(ingest.stored)} stored, ${num(ingest.duplicates)} duplicate, ${num(ingest.malformed)} bad lines.`));
  }

  // ---- Communication ------------------------------------------------------------------------
  function commTab(container) {
    const box = el('div', {});
    const heat = el('div', { class: 'heatmap' });
    const dimsBox = el('div', {});
    const dimsPlot = el('div', {});
    let map = null;
    let dims = null;
    const groups = () => (state.grouping === 'rank' ? null : groupRanks(rankCoords(), state.grouping));
    const drawMap = () => drawHeatmap(heat, map, groups());
    const drawDims = () => {
      if (!dims) return;
      const coords = rankCoords();
      drawDimsChart(dimsPlot, dims, groupRanks(coords, state.grouping).flatMap((g) => g.ranks), coords);
    };
    container.append(el('div', { class: 'controls' }, groupingSelect(() => { drawMap(); drawDims(); })), dimsBox, dimsPlot, box,
      el('h2', {}, 'Exposed communication, rank × step'), heat);
    let controller = new AbortController();
    async function reload() {
      controller.abort();
      controller = new AbortController();
      try {
        dims = await getJson(`runs/${runId}/comm_dims`, {}, controller.signal);
        dimsBox.replaceChildren(el('h2', {}, 'By mesh dimension'), dimsTable(dims));
        drawDims();
        const comm = await getJson(`runs/${runId}/comm`, {}, controller.signal);
        box.replaceChildren(
          el('h2', {}, 'By operation'),
          table([
            { title: 'Op', value: (o) => o.op },
            { title: 'Bytes', class: 'num', value: (o) => bytes(o.bytes) },
            { title: 'Count', class: 'num', value: (o) => num(o.count) },
            // Summed over every rank's operations, overlapping ones counted each.
            { title: 'Sum transfer ms', class: 'num', value: (o) => num(o.total_ms, 1) },
            { title: 'p50 ms', class: 'num', value: (o) => num(o.p50_ms, 3) },
            { title: 'p99 ms', class: 'num', value: (o) => num(o.p99_ms, 3) },
            { title: 'Sum wait ms', class: 'num', value: (o) => num(o.wait_ms, 1) },
            { title: 'algbw GB/s', class: 'num', value: (o) => num(o.algbw_gbps, 2) },
            { title: 'busbw GB/s', class: 'num', value: (o) => num(o.busbw_gbps, 2) },
          ], comm.by_op || []),
          el('h2', {}, 'By rank'),
          table([
            { title: 'Rank', class: 'num', value: (r) => r.rank },
            ...['operations', 'comm_ms', 'wait_ms', 'transfer_ms', 'mean_wait_ms', 'peers_mean_wait_ms',
              'mean_step_ms', 'mean_compute_ms', 'mean_exposed_comm_ms'].map((id) => figureColumn(id)),
            { title: 'Straggler', value: (r) => (r.straggler ? 'yes' : '') },
          ], comm.by_rank || [], (r) => ({ class: r.straggler ? 'straggler' : '' })),
        );
        map = await getJson(`runs/${runId}/comm/heatmap`, { buckets: 150 }, controller.signal);
        drawMap();
      } catch (error) {
        if (error.name !== 'AbortError') box.replaceChildren(errorBox(error));
      }
    }
    reload();
    return { refresh: reload, unmount: () => controller.abort() };
  }

  // ---- Logs ---------------------------------------------------------------------------------
  function logsTab(container) {
    const rank = el('select', { id: 'log-rank', onchange: () => { state.logRank = rank.value; changed(); } },
      el('option', { value: '' }, 'every rank'),
      Array.from({ length: detail.run.world_size || 0 }, (_, r) => el('option', { value: String(r) }, `rank ${r}`)));
    rank.value = state.logRank;
    const level = el('select', { id: 'log-level', onchange: () => { state.logLevel = level.value; changed(); } },
      ['', 'debug', 'info', 'warn', 'error'].map((l) => el('option', { value: l }, l || 'every level')));
    level.value = state.logLevel;
    let timer = null;
    const contains = el('input', { id: 'log-contains', placeholder: 'contains', value: state.logContains,
      oninput: () => { clearTimeout(timer); timer = setTimeout(() => { state.logContains = contains.value; changed(); }, 250); } });
    const list = el('div', { class: 'logs' });
    container.append(el('div', { class: 'toolbar' }, rank, level, contains), list);
    let controller = new AbortController();
    function changed() {
      saveUrl();
      reload();
    }
    async function reload() {
      controller.abort();
      controller = new AbortController();
      try {
        const { logs } = await getJson(`runs/${runId}/logs`, {
          rank: state.logRank, level: state.logLevel, contains: state.logContains, limit: 2000,
        }, controller.signal);
        list.replaceChildren(table([
          { title: 'Time', value: (l) => time(l.t) },
          { title: 'Rank', class: 'num', value: (l) => l.rank ?? '–' },
          { title: 'Level', value: (l) => el('span', { class: `level level-${l.level}` }, l.level) },
          { title: 'Message', class: 'message', value: (l) => l.message },
        ], logs));
      } catch (error) {
        if (error.name !== 'AbortError') list.replaceChildren(errorBox(error));
      }
    }
    reload();
    return { refresh: reload, unmount: () => { clearTimeout(timer); controller.abort(); } };
  }

  // ---- Flight recorder ----------------------------------------------------------------------
  function flightTab(container) {
    const controller = new AbortController();
    getJson(`runs/${runId}/flight-recorder`, {}, controller.signal).then(({ dumps }) => {
      if (!dumps || dumps.length === 0) {
        container.append(el('p', { class: 'muted' }, 'No flight-recorder dump: no rank failed or hung.'));
        return;
      }
      for (const dump of dumps) {
        const records = Array.isArray(dump.records) ? dump.records : [];
        const columns = records.length ? Object.keys(records[0]) : [];
        container.append(el('h2', {}, `Rank ${dump.rank} at ${time(dump.t)}`),
          records.length
            ? table(columns.map((c) => ({ title: c, value: (r) => (typeof r[c] === 'object' ? JSON.stringify(r[c]) : r[c]) })), records)
            : el('pre', {}, JSON.stringify(dump.records, null, 2)));
      }
    }).catch((error) => { if (error.name !== 'AbortError') container.append(errorBox(error)); });
    return { unmount: () => controller.abort() };
  }

  // ---- Live ---------------------------------------------------------------------------------
  async function loadDetail() {
    detail = await getJson(`runs/${runId}`);
    renderHeader();
    // Drawn once: the stream's redraws must not drop what is being typed.
    if (!organise.firstChild) {
      organise.append(organisePanel(detail.run, {
        onChanged: () => loadDetail().catch(() => {}),
        onDeleted: (result) => {
          destroyed = true;
          if (unmountTab) unmountTab();
          unmountTab = null;
          root.replaceChildren(deletedNotice(result));
        },
      }));
    }
  }

  let refreshing = false;
  let again = false;
  let lastRefresh = 0;
  let timer = null;
  async function onNewData() {
    if (refreshing) {
      again = true;
      return;
    }
    const wait = 500 - (Date.now() - lastRefresh);
    if (wait > 0) {
      clearTimeout(timer);
      timer = setTimeout(onNewData, wait);
      return;
    }
    refreshing = true;
    lastRefresh = Date.now();
    try {
      const hadMetrics = (detail.metrics || []).join(',');
      await loadDetail();
      if (destroyed) return;
      if ((detail.metrics || []).join(',') !== hadMetrics) {
        await loadCharts();
        if (destroyed) return;
        if (state.tab === 'charts') showTab();
        else if (refreshTab) await refreshTab();
      } else if (refreshTab) await refreshTab();
    } catch (error) {
      header.append(errorBox(error));
    } finally {
      refreshing = false;
      if (again && !destroyed) {
        again = false;
        onNewData();
      }
    }
  }
  const unsubscribe = onStream('run', (event) => { if (event.id === runId) onNewData(); });
  const unsubscribeReconnected = onStream('reconnected', () => onNewData());
  const unsubscribeRuns = onStream('runs', (changed) => {
    const list = Array.isArray(changed) ? changed : (changed && changed.runs) || [];
    if (list.some((r) => r.id === runId)) onNewData();
  });

  // The charts the run shows, from the metrics it recorded (a new metric brings its chart).
  async function loadCharts() {
    const list = await getJson('charts', { run: runId });
    chartList = list.charts;
    defaultPanel = list.default_panel || defaultPanel;
  }

  Promise.all([loadDetail(), loadCharts()]).then(() => {
    if (destroyed) return;
    // A run that failed before any step opens on its logs, under its root cause (issue 33),
    // unless the URL names a tab.
    if (!route.params.get('tab') && detail.run.status === 'failed' && !detail.final_step) state.tab = 'logs';
    saveUrl();
    renderTabs();
    showTab();
  }).catch((error) => header.replaceChildren(errorBox(error)));

  return () => {
    destroyed = true;
    unsubscribe();
    unsubscribeReconnected();
    unsubscribeRuns();
    clearTimeout(timer);
    if (unmountTab) unmountTab();
  };
}

// The communication-by-op chart's data from /comm/series ({rank, bucket_width, ops: [{op, buckets:
// [[start, ms per step]]}]}): one line per op at its buckets' starts. A bucket where some op ran but
// this one did not is 0 ms for it (the query's mean over the bucket's rank-steps), not a gap.
function opPlotData(byOp) {
  const steps = new Set();
  for (const op of byOp.ops) for (const [start] of op.buckets) steps.add(start);
  const xs = Float64Array.from([...steps].sort((a, b) => a - b));
  const data = [xs];
  const series = [{ label: 'step' }];
  const who = byOp.rank === null ? 'mean of ranks' : `rank ${byOp.rank}`;
  byOp.ops.forEach((op) => {
    const values = new Map(op.buckets);
    data.push(Array.from(xs, (x) => (values.has(x) ? values.get(x) : 0)));
    series.push({ label: `${op.op} (${who})`, stroke: opColor(op.op), width: 1.5 });
  });
  return { data, series, bands: [] };
}

function figure(label, value) {
  return el('div', { class: 'figure' }, el('span', { class: 'label' }, label), el('span', { class: 'value' }, value ?? '–'));
}

// The rank × step heat map of exposed communication on a canvas: one row per rank, one column
// per bucket, redder = more. {bucket_width, bucket_starts: [...], values: [rank][column] (ms or
// null)} as /comm/heatmap sends it. With groups ([{label, ranks}], mesh.js), the rows are the
// groups' ranks in order, a line between groups and each group's label at its first row.
function drawHeatmap(container, map, groups) {
  const starts = (map && map.bucket_starts) || [];
  const rows = (map && map.values) || [];
  if (starts.length === 0 || rows.length === 0) {
    container.replaceChildren(el('p', { class: 'muted' }, 'No communication recorded.'));
    return;
  }
  let max = 0;
  for (const row of rows) for (const v of row) if (v !== null) max = Math.max(max, v);
  const cell = Math.max(2, Math.floor(900 / starts.length));
  const rowHeight = 14;
  const grouped = groups && groups.length > 1 && groups.flatMap((g) => g.ranks).length === rows.length;
  const order = grouped ? groups.flatMap((g) => g.ranks) : rows.map((_, rank) => rank);
  const labels = order.map((rank) => `rank ${rank}`);
  const firstRows = [];
  if (grouped) {
    let at = 0;
    for (const g of groups) {
      labels[at] = `${g.label} · ${labels[at]}`;
      firstRows.push(at);
      at += g.ranks.length;
    }
  }
  const left = grouped ? 170 : 52;
  const canvas = el('canvas', { width: left + cell * starts.length + 4, height: rowHeight * rows.length + 20, class: 'heat', id: 'comm-heatmap',
    'data-rows': labels.join('|') });
  const ctx = canvas.getContext('2d');
  ctx.font = '10px sans-serif';
  order.forEach((rank, at) => {
    ctx.fillStyle = '#333';
    ctx.fillText(labels[at], 2, at * rowHeight + 11);
    if (at > 0 && firstRows.includes(at)) ctx.fillRect(left, at * rowHeight - 1, cell * starts.length, 1);
    rows[rank].forEach((v, column) => {
      if (v === null) return;
      ctx.fillStyle = `rgba(214, 39, 40, ${0.08 + 0.92 * (max > 0 ? v / max : 0)})`;
      ctx.fillRect(left + column * cell, at * rowHeight, cell, rowHeight - 1);
    });
  });
  ctx.fillStyle = '#333';
  const last = starts[starts.length - 1] + (map.bucket_width || 1) - 1;
  ctx.fillText(`steps ${starts[0]} – ${last}; exposed communication, max ${num(max, 2)} ms per step`, left, rows.length * rowHeight + 14);
  container.replaceChildren(canvas);
}
