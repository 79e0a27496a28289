import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeBackend } from '../../src/server/llm/probe.js';

// probeBackend (POST /add_llm_server's one question to a backend) against real HTTP servers that
// each speak ONE API: the simulator serves vLLM's and SGLang's routes on one port, so it cannot tell
// which routes the probe asked. Shapes: vLLM's GET /v1/models (`data[].id`, `data[].max_model_len`),
// SGLang's GET /get_model_info (`model_path`) and GET /get_server_info (`context_length`).

type Routes = Record<string, (res: http.ServerResponse) => void>;
const json =
  (body: unknown, status = 200) =>
  (res: http.ServerResponse): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

async function serve(routes: Routes): Promise<{ url: string; asked: string[]; close(): Promise<void> }> {
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    asked.push(req.url!);
    const route = routes[req.url!];
    if (route) route(res);
    else json({ detail: 'Not Found' }, 404)(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('probeBackend asks each API its own routes', () => {
  const servers: Array<{ close(): Promise<void> }> = [];
  let vllm: Awaited<ReturnType<typeof serve>>;
  let sglang: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    vllm = await serve({ '/v1/models': json({ object: 'list', data: [{ id: 'org/Only-vLLM', object: 'model', max_model_len: 4096 }] }) });
    sglang = await serve({
      '/get_model_info': json({ model_path: 'org/Only-SGLang', is_generation: true }),
      '/get_server_info': json({ context_length: 8192 }),
    });
    servers.push(vllm, sglang);
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it('vLLM: the first model of /v1/models, nothing else asked', async () => {
    vllm.asked.length = 0;
    expect(await probeBackend(`${vllm.url}/`, 'vllm', 2000)).toEqual({ answered: true, model: 'org/Only-vLLM', max_model_len: 4096 });
    expect(vllm.asked).toEqual(['/v1/models']);
  });

  it('SGLang: model_path and context_length from its two info routes, nothing else asked', async () => {
    sglang.asked.length = 0;
    expect(await probeBackend(sglang.url, 'sglang', 2000)).toEqual({ answered: true, model: 'org/Only-SGLang', max_model_len: 8192 });
    expect([...sglang.asked].sort()).toEqual(['/get_model_info', '/get_server_info']);
  });

  it('the wrong api: a 404 answer names the other API and how to register it', async () => {
    const asSglang = await probeBackend(vllm.url, 'sglang', 2000);
    expect(asSglang.answered).toBe(false);
    expect(asSglang.warning).toMatch(
      /^the backend did not answer the model probe: .*404.* \(is it a vLLM server\? register it with "api": "vllm"\); it is registered anyway/,
    );
    const asVllm = await probeBackend(sglang.url, 'vllm', 2000);
    expect(asVllm.answered).toBe(false);
    expect(asVllm.warning).toMatch(/\(is it a SGLang server\? register it with "api": "sglang"\)/);
  });

  it('a refused connection: a warning without the API hint', async () => {
    const gone = await serve({});
    await gone.close();
    const p = await probeBackend(gone.url, 'vllm', 2000);
    expect(p).toEqual({ answered: false, warning: expect.stringMatching(/did not answer the model probe: .*ECONNREFUSED/) });
    expect(p.warning).not.toMatch(/is it a/);
  });

  it('odd answers: no model listed, a null body, fields of the wrong type', async () => {
    const empty = await serve({ '/v1/models': json({ object: 'list', data: [] }) });
    const nul = await serve({ '/v1/models': json(null) });
    const odd = await serve({ '/v1/models': json({ data: [{ id: 7, max_model_len: 4096.5 }] }) });
    const sgOdd = await serve({ '/get_model_info': json({ model_path: null }), '/get_server_info': json({ context_length: '8192' }) });
    servers.push(empty, nul, odd, sgOdd);
    const listedNone = { answered: true, warning: expect.stringMatching(/\/v1\/models listed no model: is this a vLLM server\?$/) };
    expect(await probeBackend(empty.url, 'vllm', 2000)).toEqual(listedNone);
    expect(await probeBackend(nul.url, 'vllm', 2000)).toEqual(listedNone);
    expect(await probeBackend(odd.url, 'vllm', 2000)).toEqual({ answered: true });
    expect(await probeBackend(sgOdd.url, 'sglang', 2000)).toEqual({ answered: true });
  });

  it('SGLang without /get_server_info (an older server): the model alone', async () => {
    const old = await serve({ '/get_model_info': json({ model_path: 'org/Old' }) });
    servers.push(old);
    expect(await probeBackend(old.url, 'sglang', 2000)).toEqual({ answered: true, model: 'org/Old' });
  });

  it('null bodies from both SGLang routes: answered, no model, no length', async () => {
    const s = await serve({ '/get_model_info': json(null), '/get_server_info': json(null) });
    servers.push(s);
    expect(await probeBackend(s.url, 'sglang', 2000)).toEqual({ answered: true });
  });
});
