// The URL's hash as the pages' state: a view's path (run/12) and its parameters (tab, ranks, from,
// to, filters), read on navigation and rewritten in place as the state changes, so a link shares it.

// "#/run/12?tab=charts&ranks=band" -> {path: ['run', '12'], params: URLSearchParams}
export function parseHash(hash = window.location.hash) {
  const text = hash.replace(/^#\/?/, '');
  const [pathText, queryText = ''] = text.split('?');
  return { path: pathText.split('/').filter(Boolean), params: new URLSearchParams(queryText) };
}

// Rewrites the hash's query without a new history entry and without re-mounting the view: views
// call it whenever their state (tab, ranks, range, filters) changes.
export function replaceParams(params) {
  const { path } = parseHash();
  const entries = [...params.entries()].filter(([, v]) => v !== '' && v !== null && v !== undefined);
  const query = new URLSearchParams(entries).toString();
  const hash = `#/${path.join('/')}${query ? `?${query}` : ''}`;
  if (hash !== window.location.hash) {
    window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}${hash}`);
  }
}
