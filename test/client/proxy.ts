import net from 'node:net';

/**
 * A real TCP proxy in front of a server, to cut the network between client and server while the
 * server keeps running (a partition): `cut()` drops every connection and refuses new ones,
 * `heal()` lets them through again.
 */
export interface Proxy {
  url: string;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startProxy(target: string): Promise<Proxy> {
  const t = new URL(target);
  const pairs = new Set<net.Socket>();
  let down = false;
  const server = net.createServer((client) => {
    if (down) return void client.destroy();
    const upstream = net.connect(Number(t.port), t.hostname);
    pairs.add(client);
    pairs.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      pairs.delete(client);
      pairs.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      down = true;
      for (const s of pairs) s.destroy();
    },
    heal() {
      down = false;
    },
    close() {
      down = true;
      for (const s of pairs) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
