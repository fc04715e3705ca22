// Time to the first drawn chart in the browser (issue 20): Debian's headless chromium, driven by
// playwright-core from the web assets' npm install (as tests/web/browser), opens a run's page
// against `ringmaster serve` on a free loopback port, a fresh browser context (cold cache) and a
// fresh server per load, and reports navigation start -> the first chart drawn ('ringmaster:first-chart', marked by
// chart.js's uPlot draw hook) and -> every chart of the page drawn, min / median / max over the
// loads. Runs: the big run web_series_bench writes (64 ranks x 1M steps) and a small real run
// (`ringmaster run ddp_mlp.json`, 4 ranks). No anchor: a browser has nothing bare to compare with.
//
// node bench/web_first_chart.mjs --ringmaster BIN --node-modules DIR [--db BIG.db] [--loads 5]
//   [--ranks all,band] [--examples DIR] [--small-steps 300]

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { argument, CHROMIUM, freePort, launchBrowser, until } from '../tests/web/browser/browser_session.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

const ringmaster = argument('ringmaster', path.join(here, '../build/dev/app/ringmaster'));
const nodeModules = argument('node-modules', path.join(here, '../build/dev/resources/web/npm/node_modules'));
const bigDb = argument('db', path.join(here, '../build/dev/bench/web_series_cache/web-64x1000000.db'));
const examples = argument('examples', path.join(here, '../resources/examples'));
const loads = Number(argument('loads', '5'));
const rankModes = argument('ranks', 'all,band').split(',');
const smallSteps = Number(argument('small-steps', '300'));

if (!fs.existsSync(CHROMIUM)) {
  console.error(`no ${CHROMIUM} (apt-get install chromium)`);
  process.exit(2);
}
const { chromium } = createRequire(import.meta.url)(path.resolve(nodeModules, 'playwright-core'));

// The page's marks are polled often: they time the first chart.
const poll = (what, timeoutMs, probe) => until(what, timeoutMs, probe, 20);

// Runs `ringmaster args...` to its end; throws on a non-zero exit.
function runToEnd(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(ringmaster, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let errors = '';
    child.stderr.on('data', (d) => { errors += d; });
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`ringmaster ${args.join(' ')}: exit ${code}\n${errors}`))));
  });
}

// `ringmaster serve` over `db` until stop() is called.
async function serve(db) {
  const port = await freePort();
  const child = spawn(ringmaster, ['--db', db, 'serve', '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const base = `http://127.0.0.1:${port}`;
  const runs = await poll('ringmaster serve', 30000, async () => {
    try {
      const response = await fetch(`${base}/api/v1/runs`);
      return response.ok ? (await response.json()).runs : null;
    } catch {
      return null;
    }
  });
  return { base, runs, stop: async () => { child.kill('SIGTERM'); await exited; } };
}

function stats(values) {
  const v = [...values].sort((a, b) => a - b);
  return { min: v[0], median: v[Math.floor(v.length / 2)], max: v[v.length - 1] };
}
const fmt = (s) => `${s.min.toFixed(0)} / ${s.median.toFixed(0)} / ${s.max.toFixed(0)}`;

// One cold load of the run page: milliseconds from navigation start to the first chart's mark and
// to the last chart's first drawn data, and the number of charts.
async function loadOnce(browser, url) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(url);
  const result = await poll('every chart drawn', 120000, async () => page.evaluate(() => {
    const charts = document.querySelectorAll('.chart').length;
    const drawn = performance.getEntriesByName('ringmaster:chart-drawn');
    const first = performance.getEntriesByName('ringmaster:first-chart');
    if (charts === 0 || first.length === 0 || drawn.length < charts) return null;
    return { first: first[0].startTime, all: Math.max(...drawn.map((m) => m.startTime)), charts };
  }));
  await context.close();
  if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
  return result;
}

// A fresh `ringmaster serve` per load: the server shares API documents between requests until the
// database changes, and a page opened on a run nobody has looked at yet has none to share.
async function measure(browser, label, db, ranks) {
  const first = [];
  const all = [];
  let charts = 0;
  for (let i = 0; i <= loads; i += 1) {  // load 0 warms the OS's file cache, not counted
    const server = await serve(db);
    try {
      const url = `${server.base}/#/run/${server.runs[0].id}?tab=charts&ranks=${ranks}`;
      const r = await loadOnce(browser, url);
      if (i === 0) continue;
      first.push(r.first);
      all.push(r.all);
      charts = r.charts;
    } finally {
      await server.stop();
    }
  }
  console.log(`${label.padEnd(44)} ${String(ranks).padStart(6)} ${String(charts).padStart(7)} ${fmt(stats(first)).padStart(22)} ${fmt(stats(all)).padStart(22)}`);
}

async function main() {
  const browser = await launchBrowser(chromium);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringmaster-first-chart-'));
  try {
    console.log(`Time to the first drawn chart: headless chromium (${browser.version()}), 1280x900, a fresh context per load, `
      + `${loads} loads after one warm-up, a fresh ringmaster serve for each; ms from navigation start, min / median / max\n`);
    console.log(`${''.padEnd(44)} ${'ranks'.padStart(6)} ${'charts'.padStart(7)} ${'first chart ms'.padStart(22)} ${'every chart ms'.padStart(22)}`);
    const smallDb = path.join(dir, 'small.db');
    await runToEnd(['--db', smallDb, 'run', path.join(examples, 'ddp_mlp.json'), '--set', `train.steps=${smallSteps}`]);
    await measure(browser, `small real run (ddp_mlp, 4 ranks x ${smallSteps} steps)`, smallDb, 'all');
    if (fs.existsSync(bigDb)) {
      const probe = await serve(bigDb);
      const run = probe.runs[0];
      await probe.stop();
      for (const ranks of rankModes) {
        await measure(browser, `${run.name} (${run.world_size} ranks x ${run.steps} steps)`, bigDb, ranks);
      }
    } else {
      console.log(`(no ${bigDb}: run web_series_bench first for the big run)`);
    }
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
