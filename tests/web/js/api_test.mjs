// The pages' JSON reads (resources/web/src/api.js) against a real HTTP server on 127.0.0.1: a
// request aborted while its body arrives rejects with AbortError (which the pages ignore), never
// resolves to null (a run page once showed "Cannot read properties of null (reading 'band')"
// when a refresh aborted a series read mid-body), and a 200 whose body is not JSON is an error
// naming the path.
//
// node api_test.mjs SRC_DIR (resources/web/src)

import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const source = process.argv[2];
if (!source) {
  console.log('usage: node api_test.mjs SRC_DIR');
  process.exit(2);
}

const server = http.createServer((request, response) => {
  if (request.url.startsWith('/api/v1/slow')) {
    // Headers and the start of the body now, the rest never: the body is still arriving.
    response.writeHead(200, { 'Content-Type': 'application/json' });
    response.write('{"band": [[1, 2');
    return;
  }
  response.writeHead(200, { 'Content-Type': 'application/json' });
  response.end('not json');
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

// What api.js reads of the page, and fetch's relative URLs resolved against the server.
globalThis.window = { location: { search: '', pathname: '/', hash: '' }, history: { replaceState() {} } };
const nodeFetch = globalThis.fetch;
globalThis.fetch = (url, options) => nodeFetch(new URL(url, origin), options);
const { getJson, ApiError } = await import(pathToFileURL(path.resolve(source, 'api.js')).href);

const failures = [];
function check(condition, message) {
  console.log(`${condition ? 'ok' : 'FAIL'}: ${message}`);
  if (!condition) failures.push(message);
}

const controller = new AbortController();
const read = getJson('slow', {}, controller.signal);
await new Promise((resolve) => setTimeout(resolve, 200));  // the headers have come, the body has not
controller.abort();
const outcome = await read.then((value) => ({ value }), (error) => ({ error }));
check(outcome.error && outcome.error.name === 'AbortError',
  `an abort while the body arrives rejects with AbortError (got ${outcome.error ? outcome.error.name : `the value ${JSON.stringify(outcome.value)}`})`);

const bad = await getJson('broken').then((value) => ({ value }), (error) => ({ error }));
check(bad.error instanceof ApiError && bad.error.message.includes('broken'),
  `a 200 whose body is not JSON is an ApiError naming the path (got ${bad.error ? bad.error.message : JSON.stringify(bad.value)})`);

server.closeAllConnections();
server.close();
console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
