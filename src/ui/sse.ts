import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EventLog, Logged } from './event-log.js';

/** How one event stream is served. */
export interface StreamOptions<E> {
  log: EventLog<E>;
  /** Which events this client may see and asked for (tenant scope, `types=`). */
  filter?: (e: Logged<E>) => boolean;
  /** Frames without an id, sent every `everyMs` while the stream is open (the console's live counters). */
  tick?: { everyMs: number; frame: () => { name: string; data: unknown } | undefined };
  /** Bytes a client may have unread before it is cut off from events and told to re-read (default 4 MiB). */
  maxBacklogBytes?: number;
  /** Every this many ms a comment line, so proxies and the browser keep the connection (default 15 s). */
  heartbeatMs?: number;
}

/** One SSE frame. JSON.stringify never emits a newline, so `data` is one line. */
function frame(name: string, data: unknown, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The event id a client resumes from: the `Last-Event-ID` header (a reconnect), else `?last_event_id=`. */
function resumeFrom(req: FastifyRequest): number | undefined {
  const header = req.headers['last-event-id'];
  const query = (req.query as Record<string, unknown> | undefined)?.last_event_id;
  const raw = typeof header === 'string' && header !== '' ? header : typeof query === 'string' ? query : undefined;
  if (raw === undefined) return undefined;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 0 ? n : -1;
}

/**
 * Serves a text/event-stream of the log's events: first those after the client's resume point (or a
 * `reset` frame when the bounded log no longer has them all), then every new one as it is emitted.
 * Writes are synchronous with the emit, so a client sees events in id order with no gap; a client
 * that stops reading is cut off from events past `maxBacklogBytes` and sent a `reset` once it drains,
 * so a slow browser costs the server a bounded amount of memory.
 */
export function streamEvents<E>(req: FastifyRequest, reply: FastifyReply, o: StreamOptions<E>): void {
  const res = reply.raw;
  const max = o.maxBacklogBytes ?? 4 * 1024 * 1024;
  reply.hijack();
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  let lagging = false;
  let corked = false;
  const write = (s: string): void => {
    // Events emitted in one tick (a burst of job transitions) go out in one socket write.
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(() => {
        corked = false;
        res.uncork();
      });
    }
    if (!res.write(s) && res.writableLength > max && !lagging) {
      lagging = true;
      res.once('drain', () => {
        lagging = false;
        write(frame('reset', { reason: 'too_slow', last_event_id: o.log.lastId, oldest_event_id: o.log.oldestId }));
      });
    }
  };
  const send = (e: Logged<E>): void => {
    if (!lagging && (!o.filter || o.filter(e))) write(frame(e.name, e.data, e.id));
  };
  write('retry: 2000\n\n');
  const from = resumeFrom(req);
  if (from !== undefined) {
    const missed = o.log.since(from);
    if (missed) for (const e of missed) send(e);
    else
      write(
        frame('reset', {
          reason: from > o.log.lastId || from < 0 ? 'unknown_id' : 'buffer_overrun',
          last_event_id: o.log.lastId,
          oldest_event_id: o.log.oldestId,
        }),
      );
  }
  const unsubscribe = o.log.subscribe(send);
  const timers = [setInterval(() => write(': ping\n\n'), o.heartbeatMs ?? 15_000)];
  if (o.tick) {
    const tick = o.tick;
    const sendTick = (): void => {
      const f = lagging ? undefined : tick.frame();
      if (f) write(frame(f.name, f.data));
    };
    sendTick();
    timers.push(setInterval(sendTick, tick.everyMs));
  }
  for (const t of timers) t.unref();
  res.on('close', () => {
    unsubscribe();
    for (const t of timers) clearInterval(t);
  });
}
