import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { get, post } from './helpers.js';

/** A port nothing listens on: bound once, then released. */
async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

// POST /add_llm_server checks the address (invalid_address) and asks the backend once what it serves:
// a real rollout server and a real simulated backend (vLLM and SGLang routes on one port).
describe('POST /add_llm_server validates the address and probes the backend once', () => {
  let srv: RolloutServer;
  let sim: SimHandle;
  const add = (body: Record<string, unknown>) => post(`${srv.url}/add_llm_server`, body);

  beforeAll(async () => {
    sim = await startSim({ model: 'acme/Tiny-1B', max_model_len: 777 });
    srv = await startRolloutServer({ port: 0, log_level: 'silent' });
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  it.each([['not a url'], ['ftp://127.0.0.1:8000'], ['http://'], ['http://h:1/v1?x=1']])(
    'refuses %j with 400 invalid_address and registers nothing',
    async (address) => {
      const r = await add({ address });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('invalid_address');
      expect(r.body.error.message).toMatch(/^address: .*http:\/\/host:port/);
      expect((await get(`${srv.url}/status`)).body.backends).toEqual([]);
    },
  );

  it('answers with the model and max_model_len a vLLM backend reports (/v1/models)', async () => {
    const r = await add({ address: `${sim.url}/v1`, weight_version: '3' });
    expect(r.status).toBe(200);
    expect(r.body.probe).toEqual({ address: sim.url, api: 'vllm', answered: true, model: 'acme/Tiny-1B', max_model_len: 777 });
    expect(r.body.backends).toEqual([expect.objectContaining({ address: sim.url, api: 'vllm', weight_version: '3' })]);
    await post(`${srv.url}/clear_llm_server`);
  });

  it("answers with SGLang's model_path and context_length (/get_model_info, /get_server_info)", async () => {
    const r = await add({ address: sim.url, api: 'sglang' });
    expect(r.body.probe).toEqual({ address: sim.url, api: 'sglang', answered: true, model: 'acme/Tiny-1B', max_model_len: 777 });
    await post(`${srv.url}/clear_llm_server`);
  });

  it('registers a backend that does not answer, with a warning (health takes over)', async () => {
    const address = `http://127.0.0.1:${await deadPort()}`;
    const r = await add({ address });
    expect(r.status).toBe(200);
    expect(r.body.probe).toMatchObject({
      address,
      api: 'vllm',
      answered: false,
      warning: expect.stringMatching(/did not answer the model probe: .*ECONNREFUSED.*registered anyway/),
    });
    expect(r.body.probe.model).toBeUndefined();
    expect(r.body.backends.map((b: { address: string }) => b.address)).toEqual([address]);
    const quiet = await add({ address, probe: false });
    expect(quiet.body.probe).toBeUndefined();
    await post(`${srv.url}/clear_llm_server`);
  });

  it('a config file with a non-URL backend fails at load, naming the key', async () => {
    await expect(startRolloutServer({ port: 0, log_level: 'silent', llm: { backends: [{ address: 'not a url' }] } })).rejects.toThrow();
    const { loadServerConfig } = await import('../../src/server/index.js');
    await expect(loadServerConfig(undefined, {}, ['llm.backends=[{address: "not a url"}]'])).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringContaining('`llm.backends[0].address`: "not a url" is not a URL'),
    });
  });
});

describe('API bodies: an unknown field gets the nearest valid one', () => {
  it('POST /add_llm_server {"adress": ...} answers 400 naming "address"', async () => {
    const srv = await startRolloutServer({ port: 0, log_level: 'silent' });
    try {
      const r = await post(`${srv.url}/add_llm_server`, { adress: 'http://127.0.0.1:1' });
      expect(r.status).toBe(400);
      expect(r.body.error).toEqual({
        code: 'bad_request',
        message: expect.stringContaining('unknown field "adress": did you mean "address"? remove it or correct it'),
      });
    } finally {
      await srv.close();
    }
  });
});
