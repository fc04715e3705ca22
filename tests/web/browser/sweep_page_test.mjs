// Issue 37, the web sweep page in a real headless browser: a real `ringmaster sweep` of the DDP
// example, a 2x2 grid (optimizer.lr 0.01 / 1e30 x train.steps 1 / 12, 2 ranks; lr 1e30 makes the
// loss NaN at step 2, so its 12-step member fails and the others go on), served by a real
// `ringmaster serve`. The page follows the sweep live (members starting and ending, the sweep
// completed) with no reload and its pickers kept; then its table shows the 4 members with their
// values, states and runs and the failed one's status and error; the parallel-coordinates chart has
// one polyline per run with a vertex on each axis where that member's value lies (a number by
// value: every vertex on a line of its axis's scale; a category evenly); the scatter one point per
// run; and "rank by" moves the best run where the data's best moves. The runs list and a member
// run's page link to the sweep. No script error, no "null" / "undefined" / "NaN" text. Exits 77
// (CTest's skip) without chromium or playwright-core.
//
// node sweep_page_test.mjs --ringmaster BIN --examples DIR --node-modules DIR [--screenshots DIR]

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
const chromium = requireChromium(nodeModules);

// The grid in plan order (the first axis turning slowest), and which member fails.
const GRID = [{ lr: 0.01, steps: 1 }, { lr: 0.01, steps: 12 }, { lr: 1e30, steps: 1 }, { lr: 1e30, steps: 12 }];
const FAILS = 3;
const FIELDS = ['optimizer.lr', 'train.steps'];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringmaster_sweep_web_'));
const db = path.join(dir, 'runs.db');
const spec = path.join(examples, 'ddp_mlp.json');

// A ringmaster command in the background: its exit and its output.
const start = (args) => startCommand(ringmaster, args, `ringmaster ${args[2]}`);

let browser = null;
let page = null;

// The page's table: each member row's cells by column title.
function memberRows(on) {
  return on.evaluate(() => {
    const heads = [...document.querySelectorAll('#sweep-members thead th')].map((h) => h.textContent);
    return [...document.querySelectorAll('#sweep-members tbody tr')].map((row) => ({
      position: Number(row.dataset.position),
      run: row.dataset.run === '' ? null : Number(row.dataset.run),
      best: row.classList.contains('best-row'),
      cells: Object.fromEntries([...row.children].map((td, i) => [heads[i], td.textContent])),
    }));
  });
}

// A parallel-coordinates chart (the page's, or the one in box `boxId`): its axes (key, x, top,
// bottom), each line's run, title, colour and vertices, its note and its legend.
function parallelCoordinates(on, boxId = 'sweep-pc') {
  return on.evaluate((id) => {
    const box = document.getElementById(id);
    if (!box) return { axes: [], lines: [], note: null, legend: null };
    return {
      axes: [...box.querySelectorAll('g.pc-axis')].map((g) => ({ key: g.dataset.key, x: Number(g.dataset.x),
        top: Number(g.dataset.top), bottom: Number(g.dataset.bottom) })),
      lines: [...box.querySelectorAll('polyline.pc-line')].map((line) => ({ run: Number(line.dataset.run),
        title: line.querySelector('title')?.textContent ?? '', stroke: line.getAttribute('stroke'),
        points: line.getAttribute('points').trim().split(/\s+/).map((p) => p.split(',').map(Number)) })),
      note: box.querySelector('#sweep-pc-note')?.textContent ?? null,
      legend: box.querySelector('#sweep-pc-legend')?.textContent ?? null,
    };
  }, boxId);
}

// Whether every line's vertex k sits on axis k, where that run's value lies: by value on a numeric
// axis (y linear in the value, higher up for more: one slope for all runs), evenly by category on
// any other. `report`: the API's document the page drew (its axes and runs).
function verticesMatch(drawn, report, figure, fields = FIELDS) {
  const axes = [...fields, figure].map((key) => report.axes.find((a) => a.key === key));
  const problems = [];
  if (drawn.axes.map((a) => a.key).join('|') !== axes.map((a) => a.key).join('|')) problems.push(`axes ${drawn.axes.map((a) => a.key)}`);
  axes.forEach((axis, k) => {
    const placed = drawn.lines.map((line) => {
      const index = report.runs.indexOf(line.run);
      return { run: line.run, value: axis.values[index], vertex: line.points[k] };
    });
    for (const p of placed) {
      if (!p.vertex || Math.abs(p.vertex[0] - drawn.axes[k].x) > 0.5) problems.push(`run ${p.run} off axis ${axis.key}: ${p.vertex}`);
    }
    if (axis.numeric) {
      const distinct = placed.filter((p, i) => placed.findIndex((q) => q.value === p.value) === i);
      if (distinct.length < 2) return;
      const [a, b] = distinct;
      const slope = (b.vertex[1] - a.vertex[1]) / (b.value - a.value);
      if (!(slope < 0)) problems.push(`${axis.key}: a higher value is not higher up (slope ${slope})`);
      for (const p of placed) {
        const expected = a.vertex[1] + slope * (p.value - a.value);
        if (Math.abs(p.vertex[1] - expected) > 0.5) problems.push(`run ${p.run} at y ${p.vertex[1]} on ${axis.key}, expected ${expected}`);
      }
    } else {
      const { top, bottom } = drawn.axes[k];
      for (const p of placed) {
        const expected = top + (1 - (axis.categories.indexOf(String(p.value)) + 0.5) / axis.categories.length) * (bottom - top);
        if (Math.abs(p.vertex[1] - expected) > 0.5) problems.push(`run ${p.run} at y ${p.vertex[1]} on ${axis.key}, expected ${expected}`);
      }
    }
  });
  return problems;
}

// The data's best runs by a figure: every run with the lowest (or highest) value, among the
// completed runs where any completed (storage/query/sweep_report.h: a failed run is no winner).
function bestRuns(report, figure, higher) {
  const valued = report.members.filter((m) => m.run !== null && typeof m.figures[figure] === 'number');
  const completed = valued.filter((m) => m.status === 'completed');
  const candidates = completed.length ? completed : valued;
  const values = candidates.map((m) => m.figures[figure]);
  const extreme = higher ? Math.max(...values) : Math.min(...values);
  return candidates.filter((m) => m.figures[figure] === extreme).map((m) => m.run);
}

// The sweep's page from early on while `ringmaster sweep` runs its members one after another: it
// sees the sweep running, then members start and end, then the sweep completed, with no reload.
// The members' run ids, in plan order.
async function followTheSweep(base, sweepId, sweep) {
  await page.goto(`${base}/#/sweeps/${sweepId}`);
  await until('the members', 15000, async () => (await memberRows(page)).length === 4);
  await page.evaluate(() => { window.notReloaded = true; document.getElementById('sweep-rank-by').dataset.mark = 'kept'; });
  // What the page shows, every 100 ms, until the sweep ends there.
  const seen = [];
  const done = await until('the sweep completed on the page', 120000, async () => {
    const now = await page.evaluate(() => document.querySelector('h1 .status')?.textContent);
    const states = (await memberRows(page)).map((r) => `${r.cells.State}:${r.cells.Status}`).join(' ');
    if (seen.at(-1)?.states !== states || seen.at(-1)?.status !== now) seen.push({ status: now, states });
    return now === 'completed';
  }).catch(() => false);
  const ended = await sweep.exited;
  check(ended.code === 1, `ringmaster sweep exited 1, a member's run having failed (${JSON.stringify(ended)})`);
  check(done && seen[0].status === 'running' && new Set(seen.map((s) => s.states)).size >= 3
    && await page.evaluate(() => window.notReloaded === true),
  `the page followed the running sweep to completed without a reload: ${JSON.stringify(seen)}`);
  check(await page.evaluate(() => document.getElementById('sweep-rank-by').dataset.mark === 'kept'),
    'the "rank by" picker stayed in place through the refreshes (one left open stays open)');
  const report = await json(base, `/api/v1/sweeps/${sweepId}`);
  return report.members.map((m) => m.run);
}

// The table, against the API's report (returned).
async function checkTheTable(base, sweepId, runIds) {
  const report = await json(base, `/api/v1/sweeps/${sweepId}`);
  // The table: each member's swept values, state, run, status, and the failed one's error.
  const rows = await until('every member with its run', 15000, async () => {
    const now = await memberRows(page);
    return now.length === 4 && now.every((r, i) => r.run === runIds[i] && r.cells.Status !== '–') && now;
  }).catch(() => memberRows(page));
  check(rows.length === 4 && rows.every((r, i) => r.run === runIds[i] && r.cells.State === 'started'),
    `4 rows, each member started with its run in plan order: ${JSON.stringify(rows.map((r) => [r.position, r.run, r.cells.State]))}`);
  const lrText = (lr) => (lr === 0.01 ? '0.0100' : '1.00e+30');
  check(rows.every((r, i) => r.cells['optimizer.lr'] === lrText(GRID[i].lr) && r.cells['train.steps'] === String(GRID[i].steps)),
    `each row has its member's swept values: ${JSON.stringify(rows.map((r) => [r.cells['optimizer.lr'], r.cells['train.steps']]))}`);
  const failed = rows[FAILS];
  check(failed.cells.Status === 'failed' && failed.cells.Error.includes('loss became')
    && rows.filter((r, i) => i !== FAILS).every((r) => r.cells.Status === 'completed' && r.cells.Error === ''),
  `the failed member shows its status and error (${JSON.stringify([failed.cells.Status, failed.cells.Error])}), the others completed`);
  const runLinks = await page.evaluate(() => [...document.querySelectorAll('#sweep-members tbody tr')]
    .map((row) => row.querySelector('a[href^="#/run/"]')?.getAttribute('href')));
  check(runLinks.join('|') === runIds.map((id) => `#/run/${id}`).join('|'), `each member links to its run: ${runLinks}`);

  return report;
}

// The parallel coordinates and the scatter by the default figure, final loss.
async function checkTheCharts(report) {
  // The parallel coordinates by final loss: a line per run with the figure, a vertex per axis at
  // the member's value; the runs without it said.
  const withLoss = report.runs.filter((id, i) => typeof report.axes.find((a) => a.key === 'final_loss').values[i] === 'number');
  const drawn = await until('the parallel coordinates', 10000, async () => {
    const now = await parallelCoordinates(page);
    return now.lines.length === withLoss.length && now;
  }).catch(() => parallelCoordinates(page));
  check(drawn.lines.length === withLoss.length && withLoss.length >= 3 && drawn.lines.every((l) => l.points.length === 3),
    `one polyline per run with a final loss (${drawn.lines.length} of ${withLoss.length}), a vertex per axis`);
  const problems = verticesMatch(drawn, report, 'final_loss');
  check(problems.length === 0, `each vertex lies on its axis at the member's value${problems.length ? `: ${problems.join('; ')}` : ''}`);
  check(drawn.lines.every((l) => l.title.startsWith(`run ${l.run} `)), `each line's title names its run: ${JSON.stringify(drawn.lines.map((l) => l.title))}`);
  check(drawn.legend !== null && drawn.legend.includes('Final loss') && new Set(drawn.lines.map((l) => l.stroke)).size > 1,
    `the lines are coloured by final loss, with its legend (${drawn.legend})`);
  check((drawn.note === null) === (withLoss.length === report.runs.length),
    `runs without the figure are said to be left out, only then (${drawn.note})`);

  await checkCategoricalAxis();

  // The scatter: one point per run (the first swept field against the ranking figure by default).
  const scatter = await page.evaluate(() => [...document.querySelectorAll('#sweep-scatter circle.point')].map((c) => Number(c.dataset.run)));
  check(scatter.length === withLoss.length && withLoss.every((id) => scatter.includes(id)),
    `the scatter has one point per run: ${JSON.stringify(scatter)}`);
  await page.selectOption('#sweep-x', 'train.steps');
  await page.selectOption('#sweep-y', 'mean_step_ms');
  const moved = await page.evaluate(() => ({ x: document.querySelector('#sweep-scatter .axis-x')?.textContent,
    points: [...document.querySelectorAll('#sweep-scatter circle.point')].map((c) => c.dataset.x) }));
  check(moved.x === 'train.steps' && moved.points.length === 4 && moved.points.sort().join(',') === '1,1,12,12',
    `the scatter takes any axis: ${JSON.stringify(moved)}`);
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-sweep.png'), fullPage: true });

}

// A swept field that is no number (optimizer.kind) is placed by category, evenly: the page's own
// module drawing axes as the API gives them, in the browser, with one run lacking the figure.
async function checkCategoricalAxis() {
  const report = {
    runs: [7, 8, 9, 10],
    axes: [
      { key: 'optimizer.kind', name: 'optimizer.kind', unit: '', figure: false, numeric: false, categories: ['adam', 'adamw', 'sgd'],
        values: ['sgd', 'adam', 'sgd', 'adamw'], groups: [2, 0, 2, 1] },
      { key: 'final_loss', name: 'final loss', unit: '', figure: true, numeric: true, categories: ['2.1', '2.3', '2.4'],
        values: [2.3, 2.1, null, 2.4], groups: [1, 0, null, 2] },
    ],
  };
  const drawn = await page.evaluate(async (given) => {
    const { drawParallelCoordinates } = await import('/assets/parallel_coords.js');
    const box = document.createElement('div');
    box.id = 'categorical-pc';
    document.body.append(box);
    drawParallelCoordinates(box, { fields: [given.axes[0]], figureAxis: given.axes[1], runIds: given.runs, positions: [0, 1, 2, 3],
      bestRun: 8, higherIsBetter: false });
    return true;
  }, report);
  const shown = await parallelCoordinates(page, 'categorical-pc');
  await page.evaluate(() => document.getElementById('categorical-pc').remove());
  const problems = verticesMatch(shown, report, 'final_loss', ['optimizer.kind']);
  check(drawn && shown.lines.map((l) => l.run).sort((a, b) => a - b).join() === '7,8,10' && problems.length === 0,
    `a field by category: a line per run with the figure, each vertex at its category${problems.length ? `: ${problems.join('; ')}` : ''}`);
  check(shown.note !== null && shown.note.includes('run 9') && !shown.note.includes('7'), `the run without the figure is said to be left out: ${shown.note}`);
}

// "Rank by" against the data, and a figure no run has.
async function checkRankBy(base, sweepId, report, runIds) {
  // Rank by: the best row and panel are the data's best, and move when the data's best moves.
  const bestShown = () => page.evaluate(() => ({ rows: [...document.querySelectorAll('#sweep-members tr.best-row')].map((r) => Number(r.dataset.run)),
    panel: Number(document.getElementById('sweep-best')?.dataset.run), thick: [...document.querySelectorAll('#sweep-pc polyline.best')].map((l) => Number(l.dataset.run)),
    differences: [...document.querySelectorAll('#sweep-best tr[data-field]')].map((r) => r.dataset.field) }));
  const byLoss = bestRuns(report, 'final_loss', false);
  const lossBest = await bestShown();
  check(byLoss.length === 1 && lossBest.rows.join() === byLoss.join() && lossBest.panel === byLoss[0] && lossBest.thick.join() === byLoss.join(),
    `by final loss the best is run ${byLoss} (lowest, the member that trained 12 steps): ${JSON.stringify(lossBest)}`);
  check(lossBest.differences.join('|') === report.best.differences.map((d) => d.field).join('|'),
    `the best run's spec differences: ${JSON.stringify(lossBest.differences)}`);
  await page.selectOption('#sweep-rank-by', 'final_step');
  const byStep = await json(base, `/api/v1/sweeps/${sweepId}?by=final_step`);
  const stepBest = bestRuns(byStep, 'final_step', false);
  const stepShown = await until('the best by final step', 10000, async () => {
    const now = await bestShown();
    return now.panel !== byLoss[0] && now;
  }).catch(bestShown);
  check(!stepBest.includes(byLoss[0]) && stepBest.includes(stepShown.panel) && stepShown.rows.join() === String(stepShown.panel)
    && stepShown.thick.join() === String(stepShown.panel),
  `by final step (lower is better) the best moves to one of runs ${stepBest}: ${JSON.stringify(stepShown)}`);
  check(page.url().includes('by=final_step'), 'the URL keeps the ranking figure');
  const stepLines = await parallelCoordinates(page);
  check(stepLines.axes.map((a) => a.key).join('|') === `${FIELDS.join('|')}|final_step`
    && verticesMatch(stepLines, byStep, 'final_step').length === 0, 'the parallel coordinates\' last axis is the ranking figure');
  await noMissingText(page, 'the sweep page');
  // A figure no run has (a DDP run has no pipeline bubble): no line, every run named as left out.
  await page.selectOption('#sweep-rank-by', 'bubble_fraction');
  const none = await until('the chart by the bubble', 10000, async () => {
    const now = await parallelCoordinates(page);
    return now.axes.at(-1)?.key === 'bubble_fraction' && now;
  }).catch(() => parallelCoordinates(page));
  check(none.lines.length === 0 && none.note !== null && runIds.every((id) => none.note.includes(String(id)))
    && (await page.evaluate(() => document.getElementById('sweep-best').innerText)).includes('No run has'),
  `ranked by a figure no run has: no line, the runs said to be left out (${none.note}), no best run`);
  await noMissingText(page, 'the sweep page ranked by a figure no run has');

}

// The runs list and the sweeps list.
async function checkTheLists(base, sweepId, runIds) {
  // The runs list links each member run to its sweep, and the sweeps list has the sweep.
  await page.goto(`${base}/#/runs`);
  const links = await until('the runs list\'s sweep links', 15000, async () => {
    const found = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('tr.run-row')]
      .map((row) => [row.dataset.run, row.querySelector('a.sweep-link')?.getAttribute('href') ?? null])));
    return Object.keys(found).length === 4 && found;
  });
  check(runIds.every((id) => links[id] === `#/sweeps/${sweepId}`), `each member run links to its sweep: ${JSON.stringify(links)}`);
  // A member run's page names its sweep and links to it.
  await page.goto(`${base}/#/run/${runIds[1]}`);
  const line = await until('the run page\'s sweep line', 15000, async () => page.evaluate(() => {
    const found = document.getElementById('sweep-of-run');
    return found && found.textContent && { text: found.textContent, href: found.querySelector('a')?.getAttribute('href') };
  }));
  check(line.text === `member 1 of 4 of sweep ${sweepId}: ddp-grid` && line.href === `#/sweeps/${sweepId}`,
    `a member run's page links to its sweep: ${JSON.stringify(line)}`);
  await page.goto(`${base}/#/runs`);
  await until('the runs list again', 15000, async () => (await page.locator('#sweeps-link').count()) > 0);
  await page.click('#sweeps-link');
  const listed = await until('the sweeps list', 15000, async () => {
    const rows = await page.evaluate(() => [...document.querySelectorAll('#sweeps-table tr.sweep-row')].map((r) => r.innerText));
    return rows.length > 0 && rows;
  });
  check(listed.length === 1 && /ddp-grid\s+completed\s+4 \/ 4/.test(listed[0]), `the sweeps list: ${JSON.stringify(listed)}`);
  await noMissingText(page, 'the sweeps list');
}

async function main() {
  // The sweep first (it creates the database), then the server over it.
  const sweep = start(['--db', db, 'sweep', spec, '--name', 'ddp-grid', '--axis', 'optimizer.lr=0.01,1e30',
    '--axis', 'train.steps=1,12', '--set', 'launch.hosts=[{"host": "localhost", "ranks": 2}]']);
  await until('the sweep\'s database', 30000, async () => fs.existsSync(db));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const serve = start(['--db', db, 'serve', '--listen', `127.0.0.1:${port}`]);
  const sweepId = await until('the server and the sweep', 30000, async () => {
    try {
      return (await json(base, '/api/v1/sweeps')).sweeps[0]?.id;
    } catch {
      return null;
    }
  });

  browser = await launchBrowser(chromium);
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const pageErrors = [];
  collectPageErrors(page, pageErrors);

  const runIds = await followTheSweep(base, sweepId, sweep);
  const report = await checkTheTable(base, sweepId, runIds);
  await checkTheCharts(report);
  await checkRankBy(base, sweepId, report, runIds);
  await checkTheLists(base, sweepId, runIds);
  check(pageErrors.length === 0, `no script error (${pageErrors.join('; ')})`);

  serve.child.kill('SIGINT');
  const stopped = await Promise.race([serve.exited, sleep(10000).then(() => null)]);
  check(stopped !== null, 'ringmaster serve stopped on Ctrl-C');
}

runTest(main, { dir, browser: () => browser, page: () => page });
