// The web dashboard in a real headless browser during a live run: `ringmaster serve` on a free
// loopback port over a database that a real 4-rank DDP run (`ringmaster run ddp_mlp.json`) is
// recording into; Debian's chromium (driven by playwright-core, no browser download) opens the
// run page and must see the loss chart's point count grow while the run records and the
// communication-by-op chart draw one line per collective op the API has, zoom by dragging,
// and then render the runs list, the rank / comm / logs tabs, a pipeline run's page and the compare
// page with no script error or CSP violation, and the page behind an access token. Exits 77 (CTest's skip) without chromium or
// playwright-core. Optionally writes the screenshots docs/ shows.
//
// node dashboard_test.mjs --ringmaster BIN --examples DIR --node-modules DIR [--screenshots DIR]

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const SKIP = 77;
const CHROMIUM = '/usr/bin/chromium';

function argument(name, fallback = undefined) {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : fallback;
}
const ringmaster = argument('ringmaster');
const examples = argument('examples');
const nodeModules = argument('node-modules');
const screenshots = argument('screenshots');
const steps = Number(argument('steps', '300'));

function skip(why) {
  console.log(`SKIPPED: ${why}`);
  process.exit(SKIP);
}
if (!fs.existsSync(CHROMIUM)) skip(`no ${CHROMIUM} (apt-get install chromium)`);
let chromium;
try {
  ({ chromium } = createRequire(import.meta.url)(path.resolve(nodeModules, 'playwright-core')));
} catch (error) {
  skip(`playwright-core not found under ${nodeModules} (build the ringmaster_web_assets target with npm present)`);
}

const failures = [];
function check(condition, message) {
  if (!condition) {
    failures.push(message);
    console.log(`FAIL: ${message}`);
  } else {
    console.log(`ok: ${message}`);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, timeoutMs, probe) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

const children = [];
function start(args, name) {
  const child = spawn(ringmaster, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.rmName = name;
  child.rmOutput = () => output;
  children.push(child);
  return { child, exited, output: () => output, name };
}

async function json(base, apiPath) {
  const response = await fetch(`${base}${apiPath}`);
  if (!response.ok) throw new Error(`${apiPath}: ${response.status} ${await response.text()}`);
  return response.json();
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

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (process.env.RINGMASTER_TEST_VERBOSE) console.log(`console ${message.type()}: ${message.text()}`);
    if (message.type() === 'error') pageErrors.push(`console error: ${message.text()}`);
  });

  // The run page while the run records: the loss chart's point count grows without a reload.
  await page.goto(`${base}/#/run/${runId}?tab=charts&ranks=all`);
  const points = () => page.evaluate(() => Number(document.querySelector('#chart-loss')?.dataset.points || 0));
  const first = await until('a first drawn loss point', 30000, async () => (await points()) > 0 && points());
  const runningThen = (await json(base, `/api/v1/runs/${runId}`)).run.status;
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
  for (const id of ['chart-step', 'chart-comm', 'chart-comm-ops', 'chart-memory']) {
    check(await page.evaluate((i) => Number(document.getElementById(i)?.dataset.points || 0), id) > 0, `${id} drew points`);
  }
  const finalOps = await opLabels('', 'mean of ranks');
  const drawnFinal = await until('the communication-by-op chart of the whole run', 10000, async () => {
    const drawn = await drawnOps();
    return drawn && drawn.labels.join('|') === finalOps.join('|') && drawn;
  }).catch(() => drawnOps());
  check(finalOps.includes('all_reduce (mean of ranks)') && drawnFinal && drawnFinal.labels.join('|') === finalOps.join('|'),
    `the communication-by-op chart has one line per op of /comm/series: ${JSON.stringify(drawnFinal && drawnFinal.labels)} for ${JSON.stringify(finalOps)}`);
  if (screenshots) await page.screenshot({ path: path.join(screenshots, 'web-run.png'), fullPage: true });

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
  await page.click('[data-tab=comm]');
  await until('the comm tables and heat map', 10000, async () => page.locator('#comm-heatmap').count());
  check(await page.locator('.tab-body table.grid').count() === 2, 'communication by op and by rank');
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
  await page.selectOption('#filter-strategy', 'pipeline');
  await until('the strategy filter', 10000, async () => (await page.locator('tr.run-row').count()) === 1);
  check(page.url().includes('strategy=pipeline'), 'the strategy filter narrows the list and is in the URL');

  // The pipeline page: measured Gantt beside the planned one.
  await page.goto(`${base}/#/pipeline/${secondId}`);
  await until('the Gantt charts', 15000, async () =>
    (await page.locator('#gantt-measured canvas').count()) === 1 && (await page.locator('#gantt-planned canvas').count()) === 1);
  check(true, 'the pipeline page drew the measured and the planned schedule');
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

  // Compare.
  await page.goto(`${base}/#/compare?runs=${runId},${secondId}`);
  await until('the compare charts', 15000, async () =>
    Number(await page.evaluate(() => document.querySelector('#compare-loss')?.dataset.points || 0)) > 0);
  for (const id of ['compare-throughput', 'compare-step']) {
    await until(`the ${id} chart`, 15000, async () =>
      Number(await page.evaluate((i) => document.getElementById(i)?.dataset.points || 0, id)) > 0);
  }
  check(true, 'compare overlaid loss, throughput and step time');
  const differences = await page.locator('table.grid').nth(1).locator('tbody tr').count();
  check(differences > 0, `compare lists ${differences} spec differences`);
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

main().catch(async (error) => {
  failures.push(error.stack || String(error));
  console.log(`FAIL: ${error.stack || error}`);
  if (page) {
    const text = await page.evaluate(() => `${window.location.href}\n${document.body.innerText}`).catch((e) => e.message);
    console.log(`--- the page then:\n${text.slice(0, 3000)}`);
  }
  for (const child of children) console.log(`--- ${child.rmName} output:\n${child.rmOutput()}`);
}).finally(async () => {
  if (browser) await browser.close().catch(() => {});
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
  process.exit(failures.length ? 1 : 0);
});
