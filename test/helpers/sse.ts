import http from 'node:http';

/** One server-sent event as a client parses it (WHATWG EventSource rules: `id:`, `event:`, `data:` lines, a blank line ends it). */
export interface Frame {
  id?: number;
  event: string;
  data: any;
}

/** A live event stream read with node:http (no browser): the frames so far and a way to wait for one. */
export interface EventStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  frames: Frame[];
  /** Resolves with the first frame (from the start of the stream) that `pred` accepts, or rejects after `ms`. */
  until(pred: (f: Frame) => boolean, ms?: number): Promise<Frame>;
  /** Calls `fn` once the server ended the stream. */
  onEnd(fn: () => void): void;
  close(): void;
}

/** Opens GET `url` as an event stream. */
export function openEvents(url: string, headers: Record<string, string> = {}): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      const frames: Frame[] = [];
      const waiters = new Set<() => void>();
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const f: Partial<Frame> & { raw: string[] } = { raw: [] };
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const [k, ...rest] = line.split(': ');
            const v = rest.join(': ');
            if (k === 'id') f.id = Number(v);
            else if (k === 'event') f.event = v;
            else if (k === 'data') f.raw.push(v);
          }
          if (f.raw.length) frames.push({ id: f.id, event: f.event ?? 'message', data: JSON.parse(f.raw.join('\n')) });
        }
        for (const w of [...waiters]) w();
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        frames,
        until(pred, ms = 15_000) {
          return new Promise((ok, fail) => {
            const check = (): void => {
              const f = frames.find(pred);
              if (f) {
                waiters.delete(check);
                clearTimeout(t);
                ok(f);
              }
            };
            const t = setTimeout(() => {
              waiters.delete(check);
              fail(
                new Error(
                  `no matching event within ${ms} ms; got ${JSON.stringify(frames.map((x) => [x.id, x.event, x.data?.state ?? x.data?.change]))}`,
                ),
              );
            }, ms);
            waiters.add(check);
            check();
          });
        },
        onEnd: (fn) => {
          res.once('close', fn);
        },
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
  });
}
