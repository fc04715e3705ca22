// The JSON API and the live stream as the pages see them (docs/web.md): every request carries the
// access token when the page was opened with one, errors become exceptions with the server's
// message, and the stream reconnects by itself. No caching and no retries of plain requests here.

// The token is read from the page's own URL once and kept in memory; it is then taken out of the
// address bar, so a link copied from it never carries the token (the server's HttpOnly cookie
// keeps the page's own assets and a reload authorised).
const token = new URLSearchParams(window.location.search).get('token');
if (token) {
  const rest = new URLSearchParams(window.location.search);
  rest.delete('token');
  const query = rest.toString();
  window.history.replaceState(null, '', `${window.location.pathname}${query ? `?${query}` : ''}${window.location.hash}`);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Builds "/api/v1/PATH?k=v" from an object, leaving out empty values.
export function apiUrl(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(key, String(value));
  }
  const text = query.toString();
  return `/api/v1/${path}${text ? `?${text}` : ''}`;
}

export async function getJson(path, params = {}, signal = undefined) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(apiUrl(path, params), { headers, signal });
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    // Aborted while the body was arriving (a newer request replaced this one): the caller's
    // abort, which pages ignore, never an answer of null.
    if (error.name === 'AbortError') throw error;
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message);
  }
  if (body === null) throw new ApiError(response.status, `the answer to ${path} is not JSON`);
  return body;
}

// A write (issue 33: tags, note, name, delete): POST or DELETE with a JSON body, the token as for
// reads. The server refuses a write from another origin, so only this page's scripts can make one.
export async function sendJson(method, path, body = undefined) {
  const headers = { Accept: 'application/json', 'Content-Type': 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(apiUrl(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    answer = null;
  }
  if (!response.ok) {
    const message = answer && answer.error ? answer.error.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message);
  }
  return answer;
}

// One EventSource for the whole page; views subscribe to its `runs` and `run` events and get
// unsubscribed when they are left; `reconnected` fires when the stream came back after a drop. EventSource reconnects by itself (the server sends retry: 2000);
// `onState` hears "live" / "reconnecting" for the header's badge.
const listeners = { runs: new Set(), run: new Set(), reconnected: new Set() };
let source = null;

export function openStream(onState) {
  if (source) return;
  const url = token ? apiUrl('stream', { token }) : apiUrl('stream');
  source = new EventSource(url);
  // Events sent while the stream was down are not replayed: a reconnection tells the views to
  // reload what they show.
  let opened = false;
  source.addEventListener('open', () => {
    onState('live');
    if (opened) for (const listener of listeners.reconnected) listener(null);
    opened = true;
  });
  source.addEventListener('error', () => onState(source.readyState === EventSource.CLOSED ? 'offline' : 'reconnecting'));
  for (const kind of ['runs', 'run']) {
    source.addEventListener(kind, (event) => {
      let data = null;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      for (const listener of listeners[kind]) listener(data);
    });
  }
}

// Returns the function that unsubscribes.
export function onStream(kind, listener) {
  listeners[kind].add(listener);
  return () => listeners[kind].delete(listener);
}
