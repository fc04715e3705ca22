// The set-up the headless-browser tests share (dashboard, Slurm pages, sweep pages; the first-chart
// bench takes its helpers too): arguments, Debian's chromium driven by playwright-core (a test
// skips, exit 77, without either), ringmaster commands in the background, polling, the checks, and
// the test's end (its failures reported, every process it started stopped, its folder removed).
// It holds none of a test's own checks.

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const SKIP = 77;
export const CHROMIUM = '/usr/bin/chromium';

// The value after `--name` on the command line, or `fallback`.
export function argument(name, fallback = undefined) {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : fallback;
}

export function skip(why) {
  console.log(`SKIPPED: ${why}`);
  process.exit(SKIP);
}

// playwright-core's chromium from the web assets' npm install; skips the test without it or
// without /usr/bin/chromium.
export function requireChromium(nodeModules) {
  if (!fs.existsSync(CHROMIUM)) skip(`no ${CHROMIUM} (apt-get install chromium)`);
  try {
    return createRequire(import.meta.url)(path.resolve(nodeModules, 'playwright-core')).chromium;
  } catch (error) {
    return skip(`playwright-core not found under ${nodeModules} (build the ringmaster_web_assets target with npm present)`);
  }
}

// Headless chromium with nothing of its own on the network.
export function launchBrowser(chromium) {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

// Adds each script error and console error of `page` to `errors`.
export function collectPageErrors(page, errors) {
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (process.env.RINGMASTER_TEST_VERBOSE) console.log(`console ${message.type()}: ${message.text()}`);
    if (message.type() === 'error') errors.push(`console error: ${message.text()}`);
  });
}

export const failures = [];
export function check(condition, message) {
  if (!condition) failures.push(message);
  console.log(`${condition ? 'ok' : 'FAIL'}: ${message}`);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// `probe()`'s first truthy value, asked every `everyMs`; throws after `timeoutMs`.
export async function until(what, timeoutMs, probe, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

export async function json(base, apiPath) {
  const response = await fetch(`${base}${apiPath}`);
  if (!response.ok) throw new Error(`${apiPath}: ${response.status} ${await response.text()}`);
  return response.json();
}

// Issue 33: a page must never print a missing value as text ("nullnull" stood under every run's
// header: an optional part returned null into replaceChildren).
export async function noMissingText(on, where) {
  const found = await on.evaluate(() => {
    const match = /.{0,40}(null|undefined|NaN).{0,40}/.exec(document.body.innerText);
    return match ? match[0] : null;
  });
  check(found === null, `no "null", "undefined" or "NaN" text on ${where}${found === null ? '' : `: ${JSON.stringify(found)}`}`);
}

// `program args...` (a ringmaster command) in the background, named `name` in the output shown on
// a failure: its process, its exit and its output so far. The test's end kills it if it still runs.
const children = [];
export function startCommand(program, args, name) {
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.rmName = name;
  child.rmOutput = () => output;
  children.push(child);
  return { child, exited, output: () => output, name };
}

// Runs `main` to its end: an exception is a failure, shown with the page (`session.page()`) and
// every command's output; then the browser (`session.browser()`) is closed, every command still
// running killed, `session.dir` removed, and the process exits 0 only without a failure.
export function runTest(main, session) {
  main().catch(async (error) => {
    failures.push(error.stack || String(error));
    console.log(`FAIL: ${error.stack || error}`);
    const page = session.page();
    if (page) {
      const text = await page.evaluate(() => `${window.location.href}\n${document.body.innerText}`).catch((e) => e.message);
      console.log(`--- the page then:\n${text.slice(0, 3000)}`);
    }
    for (const child of children) console.log(`--- ${child.rmName} output:\n${child.rmOutput()}`);
  }).finally(async () => {
    const browser = session.browser();
    if (browser) await browser.close().catch(() => {});
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    fs.rmSync(session.dir, { recursive: true, force: true });
    console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
    process.exit(failures.length ? 1 : 0);
  });
}
