import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { NodeRegistry } from '../../src/server/registry/registry.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { systemClock } from '../../src/util/clock.js';
import { ManualClock, get, post, stagedHandler } from './helpers.js';
import { ROOT } from '../reliability/helpers/servers.js';
import path from 'node:path';

const SLOW = path.join(ROOT, 'test/server/fixtures/slow-handler.mjs');

const ADMIN = 'registry-admin-01';
const bearer = { authorization: `Bearer ${ADMIN}` };
const waitFor = async (what: string, ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};

// The shapes of Polar (ProRL Agent Server's rewrite), NVIDIA-NeMo/ProRL-Agent-Server:
//   src/polar/rollout/models.py@063c948:221-229 NodeRegistrationRequest, :254-257 NodeHeartbeatRequest,
//   :260-273 GatewayNodeInfo; src/polar/rollout/server.py@01bc72d:187-224 the node routes.
const POLAR_INFO_KEYS = [
  'node_id',
  'gateway_url',
  'max_init_workers',
  'max_run_workers',
  'max_postrun_workers',
  'metrics',
  'dispatch_reservations',
  'healthy',
  'draining',
  'heartbeat_interval_seconds',
  'last_heartbeat',
];
const POLAR_METRIC_KEYS = ['init_queue_depth', 'init_inflight', 'ready_depth', 'run_inflight', 'postrun_queue_depth', 'postrun_inflight'];

describe('NodeRegistry (hand-driven clock)', () => {
  it('a node that misses its heartbeats is reported dead, then forgotten; a heartbeat keeps it alive; a drain is one-way', async () => {
    const clock = new ManualClock();
    const r = new NodeRegistry({ missed_heartbeats: 3, forget_after_s: 60 }, clock, () => 1_700_000_000_000 + clock.now());
    const reg = {
      node_id: 'n1',
      gateway_url: 'http://127.0.0.1:1',
      max_init_workers: 4,
      max_run_workers: 8,
      max_postrun_workers: 2,
      heartbeat_interval_seconds: 5,
      backends: [],
      draining: false,
    };
    expect(r.register(reg)).toMatchObject({ node_id: 'n1', healthy: true, draining: false, last_heartbeat: '2023-11-14T22:13:20.000Z' });
    await clock.advance(14_000, 1000);
    expect(r.get('n1')?.healthy).toBe(true);
    await clock.advance(2_000, 1000);
    expect(r.get('n1')?.healthy).toBe(false); // 16 s > 3 × 5 s
    const beat = r.heartbeat('n1', { metrics: { ...emptyMetrics(), run_inflight: 3 }, max_run_workers: 12 });
    expect(beat).toMatchObject({ healthy: true, max_run_workers: 12, metrics: { run_inflight: 3 } });
    expect(r.drain('n1')).toMatchObject({ draining: true });
    // The node does not know yet: it says "not draining", the registry keeps it draining.
    expect(r.heartbeat('n1', { metrics: emptyMetrics(), draining: false })?.draining).toBe(true);
    await clock.advance(61_000, 1000);
    expect(r.list()).toEqual([]);
    expect(r.heartbeat('n1', { metrics: emptyMetrics() })).toBeUndefined();
    expect(r.heartbeat('nobody', { metrics: emptyMetrics() })).toBeUndefined();
    r.register(reg);
    expect(r.remove('n1')).toMatchObject({ node_id: 'n1', draining: true });
    expect(r.list()).toEqual([]);
  });
});

function emptyMetrics() {
  return { init_queue_depth: 0, init_inflight: 0, ready_depth: 0, run_inflight: 0, postrun_queue_depth: 0, postrun_inflight: 0 };
}

describe('the node routes, with Polar shapes, over HTTP', () => {
  let hub: RolloutServer;
  beforeAll(async () => {
    hub = await startRolloutServer({ port: 0, log_level: 'silent', token: ADMIN });
  });
  afterAll(async () => hub?.close());

  it("register with exactly Polar's body answers Polar's GatewayNodeInfo; heartbeat; GET /nodes; DELETE drains; an unknown node is 404", async () => {
    // What Polar's gateway node sends (src/polar/gateway/node.py@01bc72d:150-165: NodeRegistrationRequest.model_dump).
    const body = {
      node_id: 'gw-1',
      gateway_url: 'http://127.0.0.1:9001',
      max_init_workers: 8,
      max_run_workers: 32,
      max_postrun_workers: 8,
      heartbeat_interval_seconds: 30,
    };
    const r = await post(`${hub.url}/nodes/register`, body, bearer);
    expect(r.status).toBe(200);
    for (const k of POLAR_INFO_KEYS) expect(r.body, k).toHaveProperty(k);
    expect(Object.keys(r.body.metrics).sort()).toEqual([...POLAR_METRIC_KEYS].sort());
    expect(r.body).toMatchObject({ ...body, healthy: true, draining: false, dispatch_reservations: 0 });
    expect(Number.isNaN(Date.parse(r.body.last_heartbeat))).toBe(false);
    // Heartbeat with Polar's body (models.py@063c948:254-257, node.py@01bc72d:169-178).
    const hb = await post(`${hub.url}/nodes/gw-1/heartbeat`, { metrics: { ...emptyMetrics(), run_inflight: 5 } }, bearer);
    expect(hb.body).toMatchObject({ node_id: 'gw-1', metrics: { run_inflight: 5 } });
    expect((await get(`${hub.url}/nodes`, bearer)).body.map((n: { node_id: string }) => n.node_id)).toEqual(['gw-1']);
    expect((await get(`${hub.url}/nodes/gw-1`, bearer)).body).toMatchObject({ node_id: 'gw-1' });
    // server.py@01bc72d:219-224: DELETE drains and answers the node.
    const del = await fetch(`${hub.url}/nodes/gw-1`, { method: 'DELETE', headers: bearer });
    expect(await del.json()).toMatchObject({ node_id: 'gw-1', draining: true });
    // server.py@01bc72d:202-203: a heartbeat of an unknown node is 404 (the node then registers again, node.py@01bc72d:179-181).
    const gone = await post(`${hub.url}/nodes/nobody/heartbeat`, { metrics: {} }, bearer);
    expect([gone.status, gone.body.error.code]).toEqual([404, 'node_not_found']);
    expect((await post(`${hub.url}/nodes/register`, { ...body, max_run_workers: 0 }, bearer)).status).toBe(400);
    // Registration is the admin's; anyone with a token may list.
    expect((await post(`${hub.url}/nodes/register`, body)).status).toBe(401);
  });
});

describe('raas serve --join: register, heartbeat, drain, leave', () => {
  let hub: RolloutServer;
  let sim: SimHandle;
  const joined: RolloutServer[] = [];
  const nodes = async () => (await get(`${hub.url}/nodes`, bearer)).body as Array<Record<string, unknown>>;
  beforeAll(async () => {
    sim = await startSim({});
    hub = await startRolloutServer({ port: 0, log_level: 'silent', token: ADMIN, registry: { missed_heartbeats: 3 } });
  });
  afterEach(async () => {
    await Promise.all(joined.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await hub?.close();
    await sim?.close();
  });
  const join = (extra: Record<string, unknown> = {}, onDrained?: () => void) =>
    startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        token: ADMIN,
        workers: { init: 3, run: 5, eval: 2 },
        llm: { backends: [{ address: sim.url }] },
        handler_modules: [SLOW],
        join: { url: hub.url, heartbeat_interval_s: 0.1, backends: [{ address: 'http://127.0.0.1:8000', api: 'sglang' }], ...extra },
      },
      { handlers: [stagedHandler(systemClock)], onDrained },
    ).then((s) => (joined.push(s), s));

  it('a joined server is listed with its sizes and offered backends, heartbeats its load, and leaves when it closes', async () => {
    const s = await join({ node_id: 'node-a' });
    const n = (await nodes()).find((x) => x.node_id === 'node-a')!;
    expect(n).toMatchObject({
      gateway_url: s.url,
      max_init_workers: 3,
      max_run_workers: 5,
      max_postrun_workers: 2,
      healthy: true,
      draining: false,
      heartbeat_interval_seconds: 0.1,
      backends: [{ address: 'http://127.0.0.1:8000', api: 'sglang' }],
    });
    const job = post(`${s.url}/process`, { instance: { data_source: 'staged', run_ms: 600 } }, bearer);
    await waitFor('the job in the heartbeat', async () => (await nodes()).find((x) => x.node_id === 'node-a')?.metrics?.run_inflight === 1);
    await job;
    await s.close();
    expect((await nodes()).some((x) => x.node_id === 'node-a')).toBe(false);
  });

  it('POST /drain: what runs finishes, nothing new is taken (503 server_draining), then the server leaves the registry', async () => {
    let drained = false;
    const s = await join({ node_id: 'node-drain' }, () => (drained = true));
    const running = post(`${s.url}/process`, { instance: { data_source: 'staged', run_ms: 800 }, job_id: 'held' }, bearer);
    await waitFor('running', async () => (await get(`${s.url}/status`, bearer)).body.run === 1);
    expect((await post(`${s.url}/drain`, {}, { authorization: 'Bearer wrong-token-99' })).status).toBe(401);
    expect((await post(`${s.url}/drain`, {}, bearer)).body).toEqual({ status: 'draining', jobs: 1 });
    const refused = await post(`${s.url}/process`, { instance: { data_source: 'staged' }, job_id: 'late' }, bearer);
    expect([refused.status, refused.body.error.code, refused.headers.get('retry-after')]).toEqual([503, 'server_draining', '1']);
    // Its own job still answers (attach) and /status says draining.
    expect((await get(`${s.url}/status`, bearer)).body).toMatchObject({ status: 'draining', running: false, jobs: 1 });
    await waitFor('the registry sees the drain', async () => (await nodes()).find((x) => x.node_id === 'node-drain')?.draining === true);
    expect((await running).body).toMatchObject({ job_id: 'held', critical_error: null });
    await waitFor('drained and gone', async () => drained && !(await nodes()).some((x) => x.node_id === 'node-drain'));
  });

  it('DELETE /nodes/{id} at the registry drains the server through its next heartbeat', async () => {
    let drained = false;
    await join({ node_id: 'node-remote' }, () => (drained = true));
    await fetch(`${hub.url}/nodes/node-remote`, { method: 'DELETE', headers: bearer });
    await waitFor('drained', () => drained);
    await waitFor('gone', async () => !(await nodes()).some((x) => x.node_id === 'node-remote'));
  });
});
