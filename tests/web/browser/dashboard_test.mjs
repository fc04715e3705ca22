// The web dashboard in a real headless browser during a live run: `ringmaster serve` on a free
// loopback port over a database that a real 4-rank DDP run (`ringmaster run ddp_mlp.json`) is
// recording into; Debian's chromium (driven by playwright-core, no browser download) opens the
// run page and must see the loss chart's point count grow while the run records and the
// communication-by-op chart draw one line per collective op the API has, zoom by dragging,
// and then render the runs list, the rank / comm / logs tabs, a pipeline run's page and the compare
// page with no script error or CSP violation, and the page behind an access token. Issue 33: no
// "null", "undefined" or "NaN" text on any page, smoothing and the log scale change what the charts
// draw (kept across a reload, not toggled while typing), one hover line shows every chart's value
// at the same step, "Final loss" only for a completed run, the Gantt coloured by micro-batch with
// rows named by stage, one colour per op; the gradient norm is charted; a run's own metrics get a
// chart each, in collapsible panels by prefix, and compare overlays any of them. Issue 34: the
// Communication tab's per-mesh-dimension table and chart with the API's values, and the rank
// table and heat map grouped by the ranks' mesh coordinates. Exits 77 (CTest's
// skip) without chromium or
// playwright-core. Optionally writes the screenshots docs/ shows.
//
// node dashboard_test.mjs --ringmaster BIN --examples DIR --node-modules DIR [--screenshots DIR]

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  argument, check, collectPageErrors, freePort, json, launchBrowser, noMissingText, requireChromium, runTest, sleep,
  startCommand, until,
} from './browser_session.mjs';

const ringmaster = argument('ringmaster');
const examples = argument('examples');
const nodeModules = argument('node-modules');
const screenshots = argument('screenshots');
const steps = Number(argument('steps', '300'));
const chromium = requireChromium(nodeModules);

const start = (args, name) => startCommand(ringmaster, args, name);

// Every chart's legend on the page: its id, the step its cursor is at (uPlot's first legend row)
// and its series' values there ('--' where a series has none).
function legends(on) {
  return on.evaluate(() => [...document.querySelectorAll('.chart')].filter((box) => box.querySelector('.u-legend')).map((box) => {
    const values = [...box.querySelectorAll('.u-legend .u-series .u-value')].map((e) => e.textContent);
    return { id: box.id, step: values[0], values: values.slice(1) };
  }));
}

// Moves the mouse to a fraction of a chart's plot width, at its middle height.
async function hover(on, chartId, fraction) {
  const over = await on.locator(`#${chartId} .u-over`).boundingBox();
  await on.mouse.move(over.x + over.width * fraction, over.y + over.height / 2, { steps: 2 });
}

// The loss legend's values at one hover position, after the charts redrew.
async function lossValuesAt(on, fraction) {
  await hover(on, 'chart-loss', fraction);
  return (await legends(on)).find((l) => l.id === 'chart-loss').values;
}

async function setSmoothing(on, weight) {
  await on.evaluate((w) => {
    const slider = document.getElementById('smoothing');
    slider.value = String(w);
    slider.dispatchEvent(new Event('input', { bubbles: true }));
  }, weight);
}

// Smoothing, the log scale and the shared hover line on the run page of a finished run (issue 33).
async function checkChartViews(on, base, runId) {
  // One hover line: over the loss chart, every chart's legend is at the same step with values.
  await hover(on, 'chart-loss', 0.6);
  const shown = await legends(on);
  const lossStep = shown.find((l) => l.id === 'chart-loss')?.step;
  const metricCharts = shown.filter((l) => l.id !== 'chart-comm-ops');
  check(shown.length >= 5 && lossStep && lossStep !== '--'
    && metricCharts.every((l) => l.step === lossStep && l.values.some((v) => v !== '--'))
    && shown.every((l) => l.step !== '--' && l.values.some((v) => v !== '--')),
  `hovering the loss chart shows every chart's values at step ${lossStep}: ${JSON.stringify(shown.map((l) => [l.id, l.step, l.values[0]]))}`);
  await noMissingText(on, 'the run page with the hover line');

  // Smoothing: the loss line's values at the same step change, its legend gains no row (the raw
  // line is drawn faint behind, not a series), and 0 gives the raw values back.
  const raw = await lossValuesAt(on, 0.3);
  await setSmoothing(on, 0.95);
  await until('the smoothed loss chart', 5000, async () =>
    (await on.evaluate(() => document.getElementById('chart-loss').dataset.smoothing)) === '0.95');
  const smoothed = await lossValuesAt(on, 0.3);
  check(smoothed.length === raw.length && smoothed.some((v, i) => v !== raw[i]),
    `smoothing 0.95 changes the loss lines' values at one step (${raw.slice(0, 2)} -> ${smoothed.slice(0, 2)}), no new legend row`);
  // The setting holds across a reload (localStorage) and reaches every chart.
  await on.reload();
  await until('the charts after a reload', 15000, async () =>
    Number(await on.evaluate(() => document.querySelector('#chart-loss')?.dataset.points || 0)) > 0);
  check(await on.evaluate(() => document.getElementById('smoothing').value === '0.95'
    && [...document.querySelectorAll('.chart')].every((b) => !b.querySelector('.u-legend') || b.dataset.smoothing === '0.95')),
  'the smoothing survives a reload and applies to every chart');
  await setSmoothing(on, 0);
  const unsmoothed = await until('the raw loss values back', 5000, async () => {
    const values = await lossValuesAt(on, 0.3);
    return values.join('|') === raw.join('|') && values;
  }).catch(() => lossValuesAt(on, 0.3));
  check(unsmoothed.join('|') === raw.join('|'), `smoothing 0 draws the raw values again (${unsmoothed.slice(0, 2)})`);

  // The log scale: 'l' (with nothing focused) makes every chart's y scale logarithmic and back.
  const distributions = () => on.evaluate(() => [...document.querySelectorAll('.chart')]
    .filter((b) => b.querySelector('.u-legend')).map((b) => b.dataset.yDistr));
  check((await distributions()).every((d) => d === '1'), 'the y axes start linear');
  await on.evaluate(() => document.activeElement && document.activeElement.blur());
  await on.keyboard.press('l');
  await until('log scales', 5000, async () => (await distributions()).every((d) => d === '3'));
  check(await on.evaluate(() => document.getElementById('log-scale').checked), '\'l\' turns the log scale on, every chart\'s y scale logarithmic');
  await noMissingText(on, 'the run page on a log scale');
  await on.keyboard.press('?');
  check(await on.evaluate(() => !document.getElementById('shortcut-help').hidden
    && document.getElementById('shortcut-help').innerText.includes('Logarithmic')), '\'?\' shows the keyboard shortcuts');
  await on.keyboard.press('Escape');
  check(await on.evaluate(() => document.getElementById('shortcut-help').hidden), 'Escape closes them');
  await on.keyboard.press('l');
  await until('linear scales', 5000, async () => (await distributions()).every((d) => d === '1'));
  check(true, 'a second \'l\' turns it off');
  // A run page without ranks in its URL: a line per rank for 4 ranks (the band only past 8).
  const fresh = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await fresh.goto(`${base}/#/run/${runId}`);
  await until('the default ranks', 15000, async () =>
    Number(await fresh.evaluate(() => document.querySelector('#chart-loss')?.dataset.points || 0)) > 0);
  const lossLabels = await fresh.evaluate(() => [...document.querySelectorAll('#chart-loss .u-legend .u-series .u-label')].slice(1).map((e) => e.textContent));
  check(await fresh.evaluate(() => document.getElementById('ranks-select').value) === 'all'
    && ['rank 0', 'rank 1', 'rank 2', 'rank 3'].every((l) => lossLabels.includes(l)),
  `4 ranks open on a line per rank, named as the desktop names them: ${JSON.stringify(lossLabels)}`);
  await fresh.close();
}

// The pipeline page as the desktop's Gantt (issue 33): coloured by micro-batch (a swatch each, all
// different) and rows named by stage.
async function checkGantt(on) {
  const microBatches = JSON.parse(fs.readFileSync(path.join(examples, 'pipeline_mlp.json'), 'utf8')).train.micro_batches;
  const swatches = await on.evaluate(() => [...document.querySelectorAll('#gantt-legend .swatch-item')].map((s) => ({
    text: s.textContent, color: getComputedStyle(s.querySelector('.swatch-box')).backgroundColor })));
  check(swatches.length >= 2 && swatches.length === Math.min(microBatches, 10)
    && new Set(swatches.map((s) => s.color)).size === swatches.length && swatches[0].text === 'micro-batch 0',
  `the Gantt's colours are its micro-batches, one distinct colour each: ${JSON.stringify(swatches)}`);
  const stageNames = await on.locator('.pipeline table.grid tbody tr td:first-child').allTextContents();
  check(stageNames.length >= 2 && stageNames.every((name, i) => name === `stage ${i} (rank ${i})`),
    `the pipeline's rows are named by stage: ${JSON.stringify(stageNames)}`);
}

// Issue 34: the rank table's mesh coordinates, and its rows grouped by them (a DDP run's ranks are
// its dp replicas, every one in pp stage 0).
async function checkRankGrouping(on) {
  const meshColumn = () => on.evaluate(() => {
    const heads = [...document.querySelectorAll('.tab-body table.grid thead th')].map((h) => h.textContent);
    const at = heads.indexOf('Mesh');
    return [...document.querySelectorAll('.tab-body table.grid tbody tr')].map((r) => `${r.dataset.rank}:${r.children[at]?.textContent}`);
  });
  const expected = [0, 1, 2, 3].map((r) => `${r}:dp ${r} · tp 0 · pp 0`);
  check((await meshColumn()).join('|') === expected.join('|'), `the rank table's mesh column: ${JSON.stringify(await meshColumn())}`);
  await on.selectOption('#rank-grouping', 'pp');
  const grouped = await until('the ranks grouped by pp stage', 10000, async () =>
    on.evaluate(() => window.location.hash.includes('grouping=pp')) && meshColumn());
  check(grouped.join('|') === expected.join('|'), `by pp stage, one stage of every replica in rank order: ${JSON.stringify(grouped)}`);
  await on.selectOption('#rank-grouping', 'rank');
}

// Issue 34: the communication per mesh dimension, as /comm_dims has it: a table row per dimension,
// and the chart's series (one per dimension, a point per rank) drawn with the API's real values.
async function checkCommDims(on, base, runId) {
  const api = await json(base, `/api/v1/runs/${runId}/comm_dims`);
  const dims = api.dims.map((d) => d.dim);
  const rows = await on.evaluate(() => [...document.querySelectorAll('tr[data-dim]')].map((r) => r.dataset.dim));
  check(dims.length > 0 && rows.join('|') === dims.join('|'), `a row per mesh dimension the run communicated in: ${JSON.stringify(rows)} for ${JSON.stringify(dims)}`);
  const drawn = await until('the per-dimension chart', 10000, () => on.evaluate(() => {
    const box = document.getElementById('chart-comm-dims');
    return box && box.querySelector('canvas') && { dims: box.dataset.dims, ranks: box.dataset.ranks, values: JSON.parse(box.dataset.values),
      legend: [...box.querySelectorAll('.u-legend .u-series .u-label')].slice(1).map((e) => e.textContent) };
  }));
  const expected = dims.map((dim) => [0, 1, 2, 3].map((rank) => api.ranks.find((r) => r.rank === rank && r.dim === dim)?.ms_per_step ?? 0));
  check(drawn.dims === dims.join(',') && drawn.legend.join(',') === dims.join(',') && drawn.ranks === '0,1,2,3'
    && JSON.stringify(drawn.values) === JSON.stringify(expected) && expected.flat().some((v) => v > 0),
  `the per-dimension chart draws each rank's ms per step in each dimension: ${JSON.stringify(drawn)} for ${JSON.stringify(expected)}`);
}

// Issue 34: the heat map's rows grouped by a mesh coordinate, each group's label at its first row.
async function checkHeatmapGrouping(on, grouping, rows) {
  await on.selectOption('#rank-grouping', grouping);
  const drawn = await until(`the heat map grouped ${grouping}`, 10000, async () => {
    const labels = await on.evaluate(() => document.getElementById('comm-heatmap')?.dataset.rows);
    return labels === rows.join('|') && labels;
  }).catch(() => on.evaluate(() => document.getElementById('comm-heatmap')?.dataset.rows));
  check(drawn === rows.join('|'), `the heat map's rows ${grouping === 'rank' ? 'in rank order' : `by ${grouping}`}: ${drawn}`);
}

// "Communication by op" (issue 33: recv and all_reduce were both blue): one colour per op drawn.
async function checkOpColors(on, ops) {
  const colors = await on.evaluate(() => [...document.querySelectorAll('#chart-comm-ops .u-legend .u-series .u-marker')].slice(1)
    .map((m) => getComputedStyle(m).borderColor));
  check(colors.length === ops && new Set(colors).size === colors.length,
    `each op has its own colour in "Communication by op": ${JSON.stringify(colors)}`);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringmaster-web-browser-'));
const db = path.join(dir, 'runs.db');
let browser = null;
let page = null;

async function main() {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // The run first (it creates the database), then the server over it.
  const run = start(['--db', db, 'run', path.join(examples, 'ddp_mlp.json'), '--set', `train.steps=${steps}`], 'run');
  await until('the run database', 30000, async () => fs.existsSync(db));
  const serve = start(['--db', db, 'serve', '--listen', `127.0.0.1:${port}`], 'serve');
  const runs = await until('the server and the run', 30000, async () => {
    try {
      const body = await json(base, '/api/v1/runs');
      return body.runs.length ? body.runs : null;
    } catch {
      return null;
    }
  });
  const runId = runs[0].id;

  browser = await launchBrowser(chromium);
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const pageErrors = [];
  collectPageErrors(page, pageErrors);

  // The run page while the run records: the loss chart's point count grows without a reload.
  await page.goto(`${base}/#/run/${runId}?tab=charts&ranks=all`);
  const points = () => page.evaluate(() => Number(document.querySelector('#chart-loss')?.dataset.points || 0));
  const first = await until('a first drawn loss point', 30000, async () => (await points()) > 0 && points());
  const runningThen = (await json(base, `/api/v1/runs/${runId}`)).run.status;
  const headerWhileRunning = await page.evaluate(() => ({
    status: document.querySelector('.run-header .status')?.textContent,
    labels: [...document.querySelectorAll('.run-header .figure .label')].map((e) => e.textContent),
  }));
  check(headerWhileRunning.status !== 'running' || !headerWhileRunning.labels.includes('Final loss'),
    `a running run's header has no "Final loss" (${headerWhileRunning.status}: ${headerWhileRunning.labels.join(', ')})`);
  await noMissingText(page, 'the run page of a running run');
  // The communication-by-op chart's drawn lines: its legend's labels (uPlot's first row is the
  // step axis) and how many ops the response it drew had; null before it drew a point.
  const drawnOps = () => page.evaluate(() => {
    const box = document.getElementById('chart-comm-ops');
    if (!box || Number(box.dataset.points || 0) === 0) return null;
    const labels = [...box.querySelectorAll('.u-legend .u-series .u-label')].slice(1).map((e) => e.textContent);
    return { labels, ops: Number(box.dataset.lines) };
  });
  const opLabels = async (query, who) => (await json(base, `/api/v1/runs/${runId}/comm/series${query}`)).ops.map((o) => `${o.op} (${who})`);
  console.log(`loss chart: ${first} points while the run is ${runningThen}`);
  // Sample the count until the run ends: it must rise more than once while the run records (each
  // rise is a redraw that the stream caused; the page is never reloaded).
  let runEnded = false;
  run.exited.then(() => { runEnded = true; });
  const seen = [first];
  let opsWhileRunning = null;
  while (!runEnded) {
    const now = await points();
    if (now > seen[seen.length - 1]) seen.push(now);
    if (!opsWhileRunning) {
      const drawn = await drawnOps();
      if (drawn && drawn.labels.length > 0 && !runEnded) opsWhileRunning = drawn;
    }
    await sleep(100);
  }
  check(runningThen === 'running', `the run was still recording when the page first drew (${runningThen})`);
  check(seen.length >= 3, `the loss chart grew live, without a reload, through ${seen.join(' -> ')} points`);
  check(await page.evaluate(() => document.getElementById('live').textContent) === 'live', 'the live badge says live');
  check(opsWhileRunning && opsWhileRunning.labels.length === opsWhileRunning.ops
    && opsWhileRunning.labels.every((l) => l.endsWith(' (mean of ranks)')),
  `the communication-by-op chart drew one line per op while the run recorded (${JSON.stringify(opsWhileRunning)})`);

  const result = await run.exited;
  check(result.code === 0, `ringmaster run exited 0 (${JSON.stringify(result)})${result.code ? `\n${run.output()}` : ''}`);
  // After the run: every step drawn (telemetry every 10 steps; the last step too).
  // The server shares a document within one generation of its live feed, so a request made the
  // moment `ringmaster run` exits may still be answered from the generation before the run's end
  // (seen once under load): the run's end is what the next generation brings.
  const final = await until('the API to show the run ended', 15000, async () => {
    const detail = await json(base, `/api/v1/runs/${runId}`);
    return detail.run.status !== 'running' ? detail : null;
  });
  await until('the run page to show the finished run', 15000, async () =>
    (await page.evaluate(() => document.querySelector('.run-header .status')?.textContent)) === final.run.status);
  check(final.run.status === 'completed', `the run completed (${final.run.status})`);
  const allPoints = await until('the final points', 10000, async () => {
    const n = await points();
    return n >= Math.floor(steps / 10) && n;
  }).catch(() => points());
  check(allPoints >= Math.floor(steps / 10), `the loss chart holds the whole run: ${allPoints} points for ${steps} steps`);
  for (const id of ['chart-step', 'chart-comm', 'chart-comm-ops', 'chart-memory', 'chart-grad-norm']) {
    // A chart the run's metric list brought in during the run may still be loading: waited for.
    const drawn = await until(`${id}'s points`, 10000, async () => page.evaluate((i) => Number(document.getElementById(i)?.dataset.points || 0), id))
      .catch(() => 0);
    check(drawn > 0, `${id} drew points`);
  }
  const finalOps = await opLabels('', 'mean of ranks');
  const drawnFinal = await until('the communication-by-op chart of the whole run', 10000, async () => {
    const drawn = await drawnOps();
    return drawn && drawn.labels.join('|') === finalOps.join('|') && drawn;
  }).catch(() => drawnOps());
  check(finalOps.includes('all_reduce (mean of ranks)') && drawnFinal && drawnFinal.labels.join('|') === finalOps.join('|'),
    `the communication-by-op chart has one line per op of /comm/series: ${JSON.stringify(drawnFinal && drawnFinal.labels)} for ${JSON.stringify(finalOps)}`);
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-run.png'), fullPage: true });
  check(await page.evaluate(() => [...document.querySelectorAll('.run-header .figure .label')].some((e) => e.textContent === 'Final loss')),
    'a completed run\'s header says "Final loss"');
  await noMissingText(page, 'the run page of a completed run');
  await checkChartViews(page, base, runId);

  // Zoom by dragging across the loss chart: the URL names the range and the chart re-queries it.
  const over = await page.locator('#chart-loss .u-over').boundingBox();
  await page.mouse.move(over.x + over.width * 0.25, over.y + over.height / 2);
  await page.mouse.down();
  await page.mouse.move(over.x + over.width * 0.5, over.y + over.height / 2, { steps: 5 });
  await page.mouse.up();
  const hash = await until('a step range in the URL', 10000, async () => {
    const h = await page.evaluate(() => window.location.hash);
    return /from=\d+/.test(h) && /to=\d+/.test(h) && h;
  });
  const from = Number(/from=(\d+)/.exec(hash)[1]);
  const to = Number(/to=(\d+)/.exec(hash)[1]);
  check(from > 0 && to > from && to < steps, `dragging zoomed to steps ${from}-${to} (${hash})`);
  // The shared link reopens the same view.
  const shared = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await shared.goto(`${base}/${hash}`);
  await until('the shared link\'s chart', 15000, async () =>
    Number(await shared.evaluate(() => document.querySelector('#chart-loss')?.dataset.points || 0)) > 0);
  check((await shared.evaluate(() => document.getElementById('range-label').textContent)).includes(`steps ${from}`),
    'a shared link reopens the same run, tab and step range');
  await shared.close();

  // The band and one rank.
  for (const ranks of ['band', '2']) {
    await page.selectOption('#ranks-select', ranks);
    await until(`the loss chart for ranks=${ranks}`, 10000, async () =>
      page.evaluate((r) => window.location.hash.includes(`ranks=${r}`) && Number(document.querySelector('#chart-loss').dataset.points) > 0, ranks));
  }
  check(true, 'the band and a single rank drew');
  // One rank: the communication-by-op chart follows with that rank's lines (zoomed as the others).
  const rankOps = await opLabels(`?rank=2&from=${from}&to=${to}`, 'rank 2');
  const drawnRank = await until('the communication-by-op chart for rank 2', 10000, async () => {
    const drawn = await drawnOps();
    return drawn && drawn.labels.join('|') === rankOps.join('|') && drawn;
  }).catch(() => drawnOps());
  check(rankOps.length > 0 && drawnRank && drawnRank.labels.join('|') === rankOps.join('|'),
    `the communication-by-op chart follows the rank choice: ${JSON.stringify(drawnRank && drawnRank.labels)} for ${JSON.stringify(rankOps)}`);

  // The other tabs.
  await page.click('[data-tab=ranks]');
  const rankRows = await until('the rank table', 10000, async () => page.locator('.tab-body table.grid tbody tr').count());
  check(rankRows === 4, `the rank table has 4 rows (${rankRows})`);
  await noMissingText(page, 'the ranks tab');
  await checkRankGrouping(page);
  await page.click('[data-tab=comm]');
  await until('the comm tables and heat map', 10000, async () => page.locator('#comm-heatmap').count());
  check(await page.locator('.tab-body table.grid').count() === 3, 'communication by mesh dimension, by op and by rank');
  await noMissingText(page, 'the communication tab');
  await checkCommDims(page, base, runId);
  await checkHeatmapGrouping(page, 'dp', ['dp replica 0 · rank 0', 'dp replica 1 · rank 1', 'dp replica 2 · rank 2', 'dp replica 3 · rank 3']);
  await checkHeatmapGrouping(page, 'rank', ['rank 0', 'rank 1', 'rank 2', 'rank 3']);
  await page.click('[data-tab=logs]');
  await until('the logs table', 10000, async () => page.locator('.logs table.grid').count());
  check(true, 'the logs tab drew');
  // A link to another tab of the same run (the URL edited, or a shared link followed) opens it.
  await page.evaluate((id) => { window.location.hash = `#/run/${id}?tab=ranks`; }, runId);
  await until('the ranks tab from the URL', 10000, async () => page.locator('[data-tab=ranks].active').count());
  check(true, 'a link to another tab of the same run opens that tab');

  // The runs list, live: a second run (a pipeline job) appears in it without a reload.
  await page.goto(`${base}/#/runs`);
  await until('the runs table', 10000, async () => page.locator(`tr[data-run="${runId}"]`).count());
  await noMissingText(page, 'the runs list');
  const pipeline = start(['--db', db, 'run', path.join(examples, 'pipeline_mlp.json'), '--set', 'train.steps=20'], 'pipeline run');
  const secondId = await until('the pipeline run in the list', 60000, async () => {
    const ids = await page.locator('tr.run-row').evaluateAll((rows) => rows.map((r) => Number(r.dataset.run)));
    return ids.find((id) => id !== runId);
  });
  check(secondId > runId, `the runs list showed the new run ${secondId} live`);
  const pipelineResult = await pipeline.exited;
  check(pipelineResult.code === 0, `the pipeline run exited 0${pipelineResult.code ? `\n${pipeline.output()}` : ''}`);
  await until('both runs completed in the list', 15000, async () =>
    (await page.locator('tr.run-row .status-completed').count()) === 2);
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-runs.png') });
  // Issue 33, colour by a spec field: the two runs' strategies, two groups with a legend.
  await page.selectOption('#colour-by', 'strategy.mesh.pp');
  const grouped = await until('the runs coloured by strategy.mesh.pp', 10000, async () => page.evaluate(() => {
    const legend = [...document.querySelectorAll('#runs-legend .legend-item')].map((e) => e.textContent);
    const fills = [...document.querySelectorAll('tr.run-row .group rect')].map((r) => r.getAttribute('fill'));
    return legend.length === 2 && fills.length === 2 ? { legend, fills } : null;
  }));
  check(grouped.legend.join('|') === 'strategy.mesh.pp = 1 (1)|strategy.mesh.pp = 4 (1)' && grouped.fills[0] !== grouped.fills[1]
    && page.url().includes('colour_by=strategy.mesh.pp'), `the runs list coloured by strategy.mesh.pp: ${JSON.stringify(grouped)}`);
  await page.selectOption('#colour-by', '');
  await page.selectOption('#filter-strategy', 'pipeline');
  await until('the strategy filter', 10000, async () => (await page.locator('tr.run-row').count()) === 1);
  check(page.url().includes('strategy=pipeline'), 'the strategy filter narrows the list and is in the URL');

  // The pipeline page: measured Gantt beside the planned one.
  await page.goto(`${base}/#/pipeline/${secondId}`);
  await until('the Gantt charts', 15000, async () =>
    (await page.locator('#gantt-measured canvas').count()) === 1 && (await page.locator('#gantt-planned canvas').count()) === 1);
  check(true, 'the pipeline page drew the measured and the planned schedule');
  await noMissingText(page, 'the pipeline page');
  await checkGantt(page);
  // Issue 33: the third Gantt (the plan with the step's measured costs) and the bubble's split.
  const splitText = await page.locator('#bubble-split').textContent();
  check((await page.locator('#gantt-replayed canvas').count()) === 1
    && /stage imbalance: [+-]\d+\.\d pts; runtime overhead: [+-]\d+\.\d pts; slowest stage: \d/.test(splitText),
  `the pipeline page draws the plan with measured costs and splits the bubble: ${splitText}`);
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-pipeline.png'), fullPage: true });
  // Its run page: a pipeline run's communication by op has several ops (send, recv, ...), one line
  // each, as /comm/series lists them.
  await page.goto(`${base}/#/run/${secondId}?tab=charts&ranks=all`);
  const pipelineOps = (await json(base, `/api/v1/runs/${secondId}/comm/series`)).ops.map((o) => `${o.op} (mean of ranks)`);
  const drawnPipeline = await until('the pipeline run\'s communication-by-op chart', 15000, async () => {
    const drawn = await drawnOps();
    return drawn && drawn.labels.join('|') === pipelineOps.join('|') && drawn;
  }).catch(() => drawnOps());
  check(pipelineOps.length >= 2 && drawnPipeline && drawnPipeline.labels.join('|') === pipelineOps.join('|'),
    `a pipeline run's communication-by-op chart has one line per op: ${JSON.stringify(drawnPipeline && drawnPipeline.labels)} for ${JSON.stringify(pipelineOps)}`);
  await checkOpColors(page, pipelineOps.length);
  await noMissingText(page, 'a pipeline run\'s page');

  // Issue 33, any metric: the pipeline run's own metrics, one chart each in its prefix's panel.
  await anyMetricCharts(page, base, db, secondId);

  // Compare.
  await page.goto(`${base}/#/compare?runs=${runId},${secondId}`);
  await until('the compare charts', 15000, async () =>
    Number(await page.evaluate(() => document.querySelector('#compare-loss')?.dataset.points || 0)) > 0);
  for (const id of ['compare-throughput', 'compare-step']) {
    await until(`the ${id} chart`, 15000, async () =>
      Number(await page.evaluate((i) => document.getElementById(i)?.dataset.points || 0, id)) > 0);
  }
  check(true, 'compare overlaid loss, throughput and step time');
  await noMissingText(page, 'the compare page');
  // A key typed into a text field is text, not a shortcut.
  const logBefore = await page.evaluate(() => document.getElementById('log-scale').checked);
  await page.click('#compare-runs');
  await page.keyboard.press('End');
  await page.keyboard.type('l');
  check(await page.evaluate(() => document.getElementById('log-scale').checked) === logBefore
    && (await page.inputValue('#compare-runs')).endsWith('l'), '\'l\' typed into the run ids is text, the log scale stays');
  const differences = await page.locator('table.grid').nth(1).locator('tbody tr').count();
  check(differences > 0, `compare lists ${differences} spec differences`);
  // The picker offers every metric of either run; an own metric of one of them is overlaid.
  const offered = await page.locator('#compare-metric option').evaluateAll((o) => o.map((e) => e.value));
  check(['grad_norm', 'eval/acc', 'train/grad_norm', 'my_custom_thing'].every((m) => offered.includes(m)) && !offered.includes('wall_time_s'),
    `the compare picker offers the runs' metrics (${offered.join(', ')})`);
  await page.selectOption('#compare-metric', 'eval/acc');
  await page.click('#compare-add');
  const overlaid = await until('the eval/acc overlay', 15000, async () => page.evaluate(() => {
    const box = document.querySelector('[data-metric="eval/acc"]');
    return box && Number(box.dataset.points || 0) > 0 && { points: Number(box.dataset.points), lines: Number(box.dataset.lines) };
  }));
  check(overlaid.lines === 1 && page.url().includes('metrics=') && decodeURIComponent(page.url()).includes('eval/acc'),
    `compare overlaid eval/acc (${JSON.stringify(overlaid)}, the run that has it) and the URL names it`);
  const compareFigures = await page.locator('table.grid').filter({ hasText: 'Strategy' }).first().innerText();
  check(compareFigures.includes('Exposed comm share'), `the compare figures are named by the table of figures: ${compareFigures}`);
  // Issue 33, any figure on either axis: a spec field (strategy.mesh.pp: the DDP run's 1, the pipeline's 4) and a figure (final loss), then
  // two figures placed by value; the points are the API's values, coloured by strategy.mesh.pp.
  const axes = (await json(base, `/api/v1/compare?runs=${runId},${secondId}`)).axes.values;
  const scatterPoints = async (xKey, yKey) => {
    await page.selectOption('#compare-x', xKey);
    await page.selectOption('#compare-y', yKey);
    return until(`the scatter of ${yKey} against ${xKey}`, 10000, async () => page.evaluate(([x, y]) => {
      const box = document.getElementById('compare-scatter');
      if (!box || box.dataset.points !== '2' || !window.location.hash.includes(`x=${x}`) || !window.location.hash.includes(`y=${y}`)) return null;
      return { x: box.querySelector('.axis-x').textContent, y: box.querySelector('.axis-y').textContent,
        points: [...box.querySelectorAll('circle.point')].map((c) => ({ run: Number(c.dataset.run), x: c.dataset.x, y: c.dataset.y,
          cx: Number(c.getAttribute('cx')), cy: Number(c.getAttribute('cy')), fill: c.getAttribute('fill') })) };
    }, [xKey, yKey]));
  };
  const byKind = await scatterPoints('strategy.mesh.pp', 'final_loss');
  check(byKind.x === 'strategy.mesh.pp' && byKind.y === 'Final loss'
    && byKind.points.map((p) => `${p.x}:${Number(p.y)}`).join('|') === [0, 1].map((i) => `${axes['strategy.mesh.pp'].values[i]}:${axes.final_loss.values[i]}`).join('|'),
  `the scatter puts final loss against strategy.mesh.pp: ${JSON.stringify(byKind)}`);
  const byValue = await scatterPoints('mean_step_ms', 'samples_per_second');
  const [a, b] = byValue.points;
  check(byValue.x === 'Mean step (ms)' && Math.sign(a.cx - b.cx) === Math.sign(Number(a.x) - Number(b.x))
    && Math.sign(b.cy - a.cy) === Math.sign(Number(a.y) - Number(b.y)), `two figures are placed by value: ${JSON.stringify(byValue)}`);
  await page.selectOption('#compare-colour', 'strategy.mesh.pp');
  const legend = await until('the compare legend by strategy.mesh.pp', 10000, async () => page.evaluate(() => {
    const items = [...document.querySelectorAll('#compare-legend .legend-item')].map((e) => e.textContent);
    return items.length === 2 && items[0].startsWith('strategy.mesh.pp') ? items : null;
  }));
  const fills = await page.evaluate(() => [...document.querySelectorAll('#compare-scatter circle.point')].map((c) => c.getAttribute('fill')));
  check(legend.length === 2 && new Set(fills).size === 2, `colour by strategy.mesh.pp: ${JSON.stringify(legend)}, ${JSON.stringify(fills)}`);
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-compare.png'), fullPage: true });

  // Issue 33: a run's tags, note and name edited on its page, the runs page's search, writes from
  // another origin refused, and a deletion asked in the page before it deletes.
  await page.goto(`${base}/#/run/${secondId}?tab=ranks`);
  await until('the organise panel', 10000, async () => page.locator('#tag-input').count());
  await page.fill('#tag-input', 'baseline pp');
  await page.press('#tag-input', 'Enter');
  await until('the tags saved', 10000, async () => (await page.locator('#run-tags .tag').count()) === 2);
  await page.fill('#note-input', 'stage zero is the slow one');
  await page.click('#note-button');
  await until('the note saved', 10000, async () => (await page.locator('#organise-message').textContent()) === 'note saved');
  await page.fill('#rename-input', 'pipeline renamed');
  await page.click('#rename-button');
  await until('the header renamed', 10000, async () => (await page.locator('.run-header h1').textContent()).includes('pipeline renamed'));
  const edited = (await json(base, `/api/v1/runs/${secondId}`)).run;
  check(edited.name === 'pipeline renamed' && edited.note === 'stage zero is the slow one' && edited.tags.join(',') === 'baseline,pp',
    `the run page saved tags, note and name (${JSON.stringify([edited.name, edited.note, edited.tags])})`);
  await page.goto(`${base}/#/runs`);
  const searchFinds = async (text) => {
    await page.fill('#filter-q', text);
    return until(`the search ${text}`, 10000, async () => {
      if (!page.url().includes(`q=${encodeURIComponent(text).replace(/%20/g, '+')}`)) return null;
      const error = await page.locator('#runs-table .error').count();
      if (error) return 'error';
      const ids = await page.locator('tr.run-row').evaluateAll((rows) => rows.map((r) => Number(r.dataset.run)));
      return ids.join(',') || 'none';
    });
  };
  check(await searchFinds('tag:baseline') === `${secondId}`, 'the search finds a run by its tag');
  check(await searchFinds('slow stage') === `${secondId}`, 'the search finds a run by the words of its note');
  check(await searchFinds('train.steps=20') === `${secondId}`, 'the search finds a run by a spec field');
  check(await searchFinds('status:completed since:1h') === `${secondId},${runId}`, 'status and date terms');
  const errorsBefore = pageErrors.length;
  check(await searchFinds('status:done') === 'error', 'a term that is none is said, not ignored');
  // The browser logs the refused request (400) as a console error: that one is expected.
  pageErrors.splice(errorsBefore, pageErrors.length - errorsBefore,
    ...pageErrors.slice(errorsBefore).filter((e) => !e.includes('status of 400')));
  const write = (method, apiPath, headers, body) => fetch(`${base}/api/v1/${apiPath}`, { method, headers, body });
  const foreign = await write('POST', `runs/${secondId}/name`, { 'Content-Type': 'application/json', Origin: 'http://evil.example' }, '{"name":"pwned"}');
  const asForm = await write('POST', `runs/${secondId}/name`, { 'Content-Type': 'text/plain' }, '{"name":"pwned"}');
  const crossSite = await write('DELETE', `runs/${secondId}`, { 'Sec-Fetch-Site': 'cross-site' });
  check(foreign.status === 403 && asForm.status === 403 && crossSite.status === 403,
    `writes from another origin are refused (${foreign.status}, ${asForm.status}, ${crossSite.status})`);
  check((await json(base, `/api/v1/runs/${secondId}`)).run.name === 'pipeline renamed', 'a refused write changed nothing');
  await page.goto(`${base}/#/run/${secondId}?tab=ranks`);
  await until('the delete button', 10000, async () => page.locator('#delete-button').count());
  await page.click('#delete-button');
  await until('the question', 5000, async () => page.locator('#delete-confirm').count());
  await page.click('#delete-cancel');
  check((await fetch(`${base}/api/v1/runs/${secondId}`)).status === 200, 'deleting asks first: cancelled, the run stays');
  await page.click('#delete-button');
  await page.click('#delete-confirm');
  const notice = await until('the deletion notice', 10000, async () =>
    (await page.locator('#deleted-notice').count()) && page.locator('#deleted-notice').textContent());
  check(/deleted: \d+ rows \(.*steps \d+/.test(notice), `the page says what was deleted per table: ${notice}`);
  check((await fetch(`${base}/api/v1/runs/${secondId}`)).status === 404, 'the deleted run is gone from the API');
  check((await json(base, '/api/v1/runs')).runs.map((r) => r.id).join(',') === `${runId}`, 'the other run is kept');
  // Issue 33: a script failing on a misspelled argument. Its page opens on the logs, the root
  // cause above them with argparse's message under it (text, never markup).
  const badScript = path.join(dir, 'bad_args.py');
  fs.writeFileSync(badScript, "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr')\np.parse_args()\n");
  const badSpec = path.join(dir, 'bad_args.json');
  fs.writeFileSync(badSpec, JSON.stringify({ name: 'bad-args',
    program: { python: '/usr/bin/python3', script: badScript, args: ['--lrr', '<b>0.1</b>'] },
    launch: { hosts: [{ host: 'localhost', ranks: 1 }] } }));
  const bad = start(['--db', db, 'run', badSpec, '-q'], 'failing run');
  check((await bad.exited).code === 1, 'the failing script\'s run exited 1');
  // The server answers from its cache until it sees the file change: the list is read until it
  // holds the failed run.
  const badId = await until('the failed run in the list', 15000, async () =>
    (await json(base, '/api/v1/runs')).runs.find((r) => r.name === 'bad-args')?.id);
  await page.goto(`${base}/#/run/${badId}`);
  await page.reload();  // the page was on the run just deleted: opened afresh
  await until('the root cause with its stderr lines', 15000, async () =>
    (await page.evaluate(() => document.getElementById('error-output')?.textContent || '')).includes('unrecognized arguments: --lrr <b>0.1</b>'));
  check((await page.evaluate(() => document.getElementById('root-cause').textContent)).includes('exit code 2'), 'the root cause names the exit code');
  check(await page.evaluate(() => document.querySelector('#error-output b') === null), 'the script\'s text is text, not markup');
  check(await page.evaluate(() => document.querySelector('.tab.active')?.dataset.tab) === 'logs', 'a run that failed before any step opens on its logs');

  // With an access token (forced on loopback by --token-file): the page opened with ?token= draws
  // the run (its assets through the server's cookie, the API with the token), the token leaves the
  // address bar, and a browser without it gets 401.
  const tokenFile = path.join(dir, 'token');
  const token = 'f3a1c2d4e5b60718293a4b5c6d7e8f90';
  fs.writeFileSync(tokenFile, token);
  const tokenPort = await freePort();
  const tokenBase = `http://127.0.0.1:${tokenPort}`;
  const guarded = start(['--db', db, 'serve', '--listen', `127.0.0.1:${tokenPort}`, '--token-file', tokenFile], 'serve with a token');
  await until('the server with a token', 15000, async () => {
    try {
      return (await fetch(`${tokenBase}/api/v1/runs`)).status === 401;
    } catch {
      return false;
    }
  });
  const withToken = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  withToken.on('pageerror', (error) => pageErrors.push(`page error (token): ${error.message}`));
  await withToken.goto(`${tokenBase}/?token=${token}#/run/${runId}?tab=charts&ranks=band`);
  await until('the run page behind a token', 15000, async () =>
    Number(await withToken.evaluate(() => document.querySelector('#chart-loss')?.dataset.points || 0)) > 0);
  check(!withToken.url().includes(token), `the token left the address bar (${withToken.url()})`);
  await until('the live badge behind a token', 10000, async () =>
    (await withToken.evaluate(() => document.getElementById('live').textContent)) === 'live');
  check(true, 'the page opened with ?token= drew the run and its stream is live');
  await withToken.close();
  const stranger = await browser.newContext();
  const strangerPage = await stranger.newPage();
  const denied = await strangerPage.goto(`${tokenBase}/#/runs`);
  check(denied.status() === 401, `a browser without the token gets ${denied.status()}`);
  await stranger.close();
  guarded.child.kill('SIGINT');

  check(pageErrors.length === 0, `no script error or CSP violation${pageErrors.length ? `: ${pageErrors.join('; ')}` : ''}`);
  serve.child.kill('SIGINT');
  const served = await Promise.race([serve.exited, sleep(10000).then(() => null)]);
  check(served !== null, 'ringmaster serve stopped on Ctrl-C');
}

// A run's own metrics as the recorder stores them (the metrics, scalars and scalar_rollups rows,
// written with python3's sqlite3 while the server reads): a chart each, titled by its name, in
// the panel of its prefix (the default one first), each panel collapsible.
async function anyMetricCharts(page, base, dbPath, runId) {
  const names = ['train/grad_norm', 'eval/acc', 'my_custom_thing'];
  const script = `
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
run = int(sys.argv[2])
for name in sys.argv[3:]:
    db.execute("INSERT OR IGNORE INTO metrics (name) VALUES (?)", (name,))
    (metric,) = db.execute("SELECT id FROM metrics WHERE name = ?", (name,)).fetchone()
    for rank in range(4):
        points = [(step, 1.0 / step + rank) for step in range(1, 21)]
        db.executemany("INSERT INTO scalars VALUES (?, ?, ?, ?, ?, 0)", [(run, metric, rank, s, v) for s, v in points])
        for width in (64, 512, 4096):
            values = [v for s, v in points]
            db.execute("INSERT INTO scalar_rollups VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, 1, 20, ?)",
                       (run, metric, rank, width, len(values), sum(values), min(values), max(values), values[-1]))
db.commit()
`;
  const writer = spawn('python3', ['-c', script, dbPath, String(runId), ...names], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  writer.stderr.on('data', (d) => { output += d; });
  const code = await new Promise((resolve) => writer.on('exit', resolve));
  check(code === 0, `the own metrics were written${code ? `: ${output}` : ''}`);
  // The server answers from its cache until it sees the file change: its chart list is read until
  // it holds them. (The page may be on this run already: loaded again, it reads them anew.)
  await until('the API\'s chart list with the own metrics', 15000, async () =>
    (await json(base, `/api/v1/charts?run=${runId}`)).charts.some((c) => c.id === 'metric:eval/acc'));
  await page.goto(`${base}/#/run/${runId}?tab=charts&ranks=all`);
  await page.reload();
  const ownChart = (name) => `[id="chart-metric:${name}"]`;
  await until('the own metrics\' charts', 15000, async () => page.evaluate((ids) => ids.every((id) => Number(document.querySelector(id)?.dataset.points || 0) > 0), names.map(ownChart)));
  const panels = await page.locator('details.panel').evaluateAll((d) => d.map((e) => ({
    panel: e.dataset.panel, title: e.querySelector('summary').textContent, charts: [...e.querySelectorAll('.chart')].map((c) => c.id) })));
  const byName = Object.fromEntries(panels.map((p) => [p.panel, p]));
  // A pipeline run also has the trainer's own pipeline/wait_ms, in its panel.
  const expectedPanels = ['', 'eval', ...(byName.pipeline ? ['pipeline'] : []), 'train'];
  check(panels.map((p) => p.panel).join('|') === expectedPanels.join('|') && byName[''].title === 'Charts'
    && (!byName.pipeline || byName.pipeline.charts.join() === 'chart-metric:pipeline/wait_ms')
    && byName[''].charts.includes('chart-loss') && byName[''].charts.includes('chart-metric:my_custom_thing')
    && byName.eval.charts.join() === 'chart-metric:eval/acc' && byName.train.charts.join() === 'chart-metric:train/grad_norm',
  `a chart per own metric, in panels by prefix: ${JSON.stringify(panels)}`);
  const title = await page.locator(`${ownChart('eval/acc')} .u-title`).textContent();
  check(title === 'eval/acc', `an own metric's chart is titled by its name (${title})`);
  // A panel collapses and opens again, its chart drawn.
  await page.click('details.panel[data-panel="train"] > summary');
  check(await page.evaluate(() => !document.querySelector('details.panel[data-panel="train"]').open), 'a panel collapses');
  await page.click('details.panel[data-panel="train"] > summary');
  await until('the reopened panel\'s chart', 10000, async () => page.evaluate((id) => {
    const box = document.querySelector(id);
    return box && box.offsetHeight > 100 && Number(box.dataset.points) > 0;
  }, ownChart('train/grad_norm')));
  check(true, 'a collapsed panel opens again with its chart');
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-run-panels.png'), fullPage: true });
}

runTest(main, { dir, browser: () => browser, page: () => page });
