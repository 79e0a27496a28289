import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** A running Prometheus endpoint. */
export interface MetricsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `registry` on `GET /metrics` (Prometheus text format) at host:port (port 0: a free one);
 * every other path answers 404 JSON. Closing drops open connections, so nothing outlives the run.
 */
export async function serveMetrics(registry: Registry, port: number, host = '127.0.0.1'): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/metrics') {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        },
        (err: unknown) => {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'internal', message: `metrics: ${String(err)}` } }));
        },
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: { code: 'route_not_found', message: `${req.method} ${url.pathname}: the coordinator serves only GET /metrics here` },
      }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const p = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${p}/metrics`,
    port: p,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
