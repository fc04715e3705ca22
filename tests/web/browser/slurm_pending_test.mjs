// Issue 35, the web pages of a run handed to Slurm, in a real headless browser: runs made in a
// real database through the storage's own functions (scheduler_run_fixture: createRun,
// recordSchedulerJob, recordSchedulerState, as the Slurm launch records them) and served by a real
// `ringmaster serve` on a free loopback port. The API carries `scheduler` for those runs only; the
// run page shows a pending job as pending with "Slurm job 4242: PENDING (Resources)" by its status,
// and follows the stream when Slurm gives a new reason and when it starts the job (running, its
// nodes), without a reload; the runs list shows each job's id and state. No script error, no "null" / "undefined" / "NaN" text. Exits 77 (CTest's
// skip) without chromium or playwright-core.
//
// node slurm_pending_test.mjs --ringmaster BIN --fixture BIN --node-modules DIR

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  argument, check, collectPageErrors, freePort, json, launchBrowser, noMissingText, requireChromium, runTest, sleep,
  startCommand, until,
} from './browser_session.mjs';

const ringmaster = argument('ringmaster');
const fixture = argument('fixture');
const nodeModules = argument('node-modules');
const chromium = requireChromium(nodeModules);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ringmaster_slurm_web_'));
const db = path.join(dir, 'runs.db');
// The fixture, run to its end: what it printed.
function storage(...args) {
  return execFileSync(fixture, [db, ...args], { encoding: 'utf8', timeout: 30000 }).trim();
}

let browser = null;
let page = null;

async function main() {
  const pending = Number(storage('create', 'queued', '4242', 'PENDING', 'Resources', ''));
  const other = Number(storage('create', 'started', '4243', 'RUNNING', '', 'node[3-4]'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const serve = startCommand(ringmaster, ['--db', db, 'serve', '--listen', `127.0.0.1:${port}`], 'ringmaster serve');

  // The API: `scheduler` on both runs, as recorded.
  const listed = await until('the server', 30000, async () => {
    try {
      return (await json(base, '/api/v1/runs')).runs;
    } catch {
      return null;
    }
  });
  const entry = listed.find((r) => r.id === pending);
  const job = { kind: 'slurm', job_id: '4242', state: 'PENDING', reason: 'Resources', nodes: '' };
  const sameJob = (found) => found && Object.keys(found).length === Object.keys(job).length
    && Object.entries(job).every(([key, value]) => found[key] === value);
  check(entry && entry.status === 'pending' && sameJob(entry.scheduler),
  `/api/v1/runs gives the pending run its Slurm job (${JSON.stringify(entry)})`);
  const detail = await json(base, `/api/v1/runs/${pending}`);
  check(detail.run.status === 'pending' && detail.run.scheduler.job_id === '4242' && detail.run.scheduler.reason === 'Resources',
    `/api/v1/runs/${pending} gives the run pending with its job (${JSON.stringify(detail.run.scheduler)})`);

  browser = await launchBrowser(chromium);
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const pageErrors = [];
  collectPageErrors(page, pageErrors);

  // The run page: pending, and the job's state and reason by the status.
  await page.goto(`${base}/#/run/${pending}`);
  const header = () => page.evaluate(() => ({
    status: document.querySelector('.run-header h1 .status')?.textContent,
    job: document.getElementById('scheduler-job')?.textContent,
  }));
  const shown = await until('the pending run\'s header', 15000, async () => {
    const now = await header();
    return now.job && now;
  });
  check(shown.status === 'pending', `the run page shows the run pending (${shown.status})`);
  check(shown.job === 'Slurm job 4242: PENDING (Resources)', `the run page shows "${shown.job}"`);
  await noMissingText(page, 'the pending run\'s page');

  // A new reason with the same status is news too (the stream's row changed), then Slurm starts
  // the job: the page follows the stream, without a reload.
  await page.evaluate(() => { window.notReloaded = true; });
  storage('state', String(pending), 'PENDING', 'Priority', '');
  const requeued = await until('the new reason on the page', 15000, async () => {
    const now = await header();
    return now.job && now.job.includes('Priority') && now;
  }).catch(header);
  check(requeued.status === 'pending' && requeued.job === 'Slurm job 4242: PENDING (Priority)',
    `the page follows Slurm's new reason (${JSON.stringify(requeued)})`);
  storage('state', String(pending), 'RUNNING', '', 'node[1-2]');
  const started = await until('the started job on the page', 15000, async () => {
    const now = await header();
    return now.status === 'running' && now.job && now.job.includes('RUNNING') && now;
  }).catch(header);
  check(started.status === 'running' && started.job === 'Slurm job 4242: RUNNING on node[1-2]'
    && await page.evaluate(() => window.notReloaded === true),
  `the page follows Slurm starting the job, without a reload (${JSON.stringify(started)})`);

  // The runs list: each job's id and state beside its status.
  await page.goto(`${base}/#/runs`);
  const rows = await until('the runs list', 15000, async () => {
    const cells = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('tr.run-row')]
      .map((row) => [row.dataset.run, row.innerText])));
    return Object.keys(cells).length === 2 && cells;
  });
  check(/running\s+Slurm 4242: RUNNING/.test(rows[pending]), `the runs list names the first job (${JSON.stringify(rows[pending])})`);
  check(/running\s+Slurm 4243: RUNNING/.test(rows[other]), `the runs list names the second job (${JSON.stringify(rows[other])})`);
  await noMissingText(page, 'the runs list');
  check(pageErrors.length === 0, `no script error (${pageErrors.join('; ')})`);

  serve.child.kill('SIGINT');
  const stopped = await Promise.race([serve.exited, sleep(10000).then(() => null)]);
  check(stopped !== null, 'ringmaster serve stopped on Ctrl-C');
}

runTest(main, { dir, browser: () => browser, page: () => page });
