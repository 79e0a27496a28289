// A real HTTP server that misbehaves as an LLM backend in one chosen way. /v1/models answers
// normally (so only the generation path misbehaves) except in the 500 and reset modes.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** How the backend misbehaves on /v1/completions (and /generate). */
export type BadMode = 'http_500' | 'garbage' | 'wrong_shape' | 'slow' | 'reset';

export interface BadBackend {
  url: string;
  mode: BadMode;
  /** Generation requests received. */
  hits: number;
  close(): Promise<void>;
}

/** Starts a misbehaving backend on 127.0.0.1, port 0. */
export async function badBackend(mode: BadMode): Promise<BadBackend> {
  const sockets = new Set<Socket>();
  const state = { hits: 0 };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/v1/models' && mode !== 'http_500' && mode !== 'reset') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'bad-model', object: 'model', max_model_len: 40960 }] }));
        return;
      }
      state.hits++;
      if (mode === 'http_500') {
        res.statusCode = 500;
        res.end(JSON.stringify({ error: { message: 'Internal Server Error (injected)' } }));
      } else if (mode === 'garbage') {
        res.setHeader('content-type', 'application/json');
        res.end('{"choices": [\u0000 not json at all');
      } else if (mode === 'wrong_shape') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ id: 'x', object: 'text_completion', usage: {} }));
      } else if (mode === 'reset') {
        req.socket.destroy();
      }
      // slow: never answers; the client's request timeout must end the wait.
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    mode,
    get hits() {
      return state.hits;
    },
    close() {
      closing ??= new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      });
      return closing;
    },
  };
}
