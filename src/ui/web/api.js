// The pages' access to their server: JSON reads, the cancel action and the event stream.

/** An API error with the server's stable code. */
export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * GETs JSON from the page's own server (the session cookie authenticates it).
 * @template T
 * @param {string} path
 * @param {AbortSignal} [signal]
 * @returns {Promise<T>}
 */
export async function getJson(path, signal) {
  const r = await fetch(path, { signal, headers: { accept: 'application/json' } });
  const text = await r.text();
  /** @type {unknown} */
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(r.status, 'bad_answer', `${path} answered ${r.status} with something that is not JSON`);
  }
  if (!r.ok) {
    const e = /** @type {{error?: {code?: string, message?: string}}} */ (body).error;
    throw new ApiError(r.status, e?.code ?? 'error', e?.message ?? `${path} answered ${r.status}`);
  }
  return /** @type {T} */ (body);
}

/**
 * POSTs JSON (same-origin: the session cookie authenticates it).
 * @param {string} path
 * @param {unknown} body
 * @returns {Promise<unknown>}
 */
export async function postJson(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const out = await r.json();
  if (!r.ok) throw new ApiError(r.status, out?.error?.code ?? 'error', out?.error?.message ?? `${path} answered ${r.status}`);
  return out;
}

/**
 * @typedef {{ onEvent: (name: string, data: unknown, id: number | undefined) => void, onReset: () => void, onState?: (s: 'open' | 'connecting' | 'closed') => void }} StreamHandlers
 */

/**
 * Follows the server's event stream from `lastId` (the snapshot the page read), so no event between
 * the snapshot and the stream is missed. EventSource reconnects by itself with Last-Event-ID; a
 * `reset` frame (events lost) asks the page to read its snapshot again.
 * @param {string} path e.g. "/events?stats=1"
 * @param {number | undefined} lastId
 * @param {StreamHandlers} h
 * @returns {() => void} closes the stream
 */
export function follow(path, lastId, h) {
  const url = lastId === undefined ? path : `${path}${path.includes('?') ? '&' : '?'}last_event_id=${lastId}`;
  const es = new EventSource(url);
  h.onState?.('connecting');
  es.onopen = () => h.onState?.('open');
  es.onerror = () => h.onState?.(es.readyState === EventSource.CLOSED ? 'closed' : 'connecting');
  /** @param {string} name */
  const listen = (name) =>
    es.addEventListener(name, (ev) => {
      const m = /** @type {MessageEvent<string>} */ (ev);
      const id = m.lastEventId === '' ? undefined : Number(m.lastEventId);
      if (name === 'reset') h.onReset();
      else h.onEvent(name, JSON.parse(m.data), id);
    });
  for (const n of ['job', 'backend', 'stats', 'run', 'reset']) listen(n);
  return () => es.close();
}
