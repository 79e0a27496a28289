import Fastify, { type FastifyInstance } from 'fastify';
import type { Socket } from 'node:net';
import { ProcessRequest, type Result } from '../../src/protocol/process.js';

/**
 * A real HTTP server (fastify on port 0) that speaks the rollout server's routes with scripted
 * behaviour, for client tests that need failures on demand: 5xx with Retry-After, blackouts (every
 * connection dropped while jobs keep running), crashes. Jobs end after `instance.hold_ms` (0 by
 * default; -1 holds until /cancel), with a result whose `backend` names this server. Like the real
 * server, /process with `attach: true` answers from the job that has the id; without it, it starts
 * a new job (`jobs` then holds the newest under that id).
 */
export interface FakeServer {
  url: string;
  port: number;
  name: string;
  /** Jobs started per job id (a plain /process under a known id starts another). */
  starts: Map<string, number>;
  /** Every request received: method, path, body, auth header. */
  log: Array<{ method: string; path: string; body: unknown; auth?: string }>;
  /** Answers the next /process calls with these errors, one each, before behaving normally. */
  failProcess: Array<{ status: number; retryAfter?: string; code?: string }>;
  jobs: Map<string, FakeJob>;
  backends: Array<{ address: string; api: 'vllm' | 'sglang'; weight_version: string; active: number; assigned: number }>;
  /** Connections open now, and the most open at once since the start (or since it was set to 0). */
  openSockets(): number;
  peakSockets: number;
  /** While on, every new connection and every held answer is dropped; jobs keep running. */
  blackout(on: boolean): void;
  /** Closes the listener and destroys every connection, like a killed process. */
  crash(): Promise<void>;
  close(): Promise<void>;
}

export interface FakeJob {
  id: string;
  state: 'run' | 'done' | 'cancelled';
  result?: Result;
  waiters: Array<(r: Result) => void>;
  timer?: ReturnType<typeof setTimeout>;
}

export function makeResult(jobId: string, name: string, critical: Result['critical_error'] = null): Result {
  return {
    instance_id: 'i',
    trajectory_id: null,
    git_patch: null,
    success: critical === null,
    finish: true,
    messages: [],
    tools: [],
    end_properly: critical === null,
    resolved: false,
    critical_error: critical,
    filter: false,
    error: null,
    job_id: jobId,
    data_source: 'chat',
    reward: critical === null ? 1 : 0,
    finish_reason: critical === 'cancelled' ? 'cancelled' : 'finish',
    backend: name,
    policy_version: 0,
    weight_versions: [],
    num_turns: 1,
    timing: {
      init_time: 0,
      run_time: 0,
      eval_time: 0,
      others_time: 0,
      counted_elapsed: 0,
      timeout_triggered: false,
      queued_s: 0,
      init_s: 0,
      run_s: 0,
      eval_s: 0,
      counted_s: 0,
    },
    tokens: { prompt_ids: [1], response_ids: [2], response_mask: [1], logprobs: [0] },
  };
}

export async function startFakeServer(opts: { name?: string; token?: string; host?: string; port?: number } = {}): Promise<FakeServer> {
  const name = opts.name ?? 'fake';
  const app: FastifyInstance = Fastify({ forceCloseConnections: true });
  const sockets = new Set<Socket>();
  let dark = false;
  const s: Partial<FakeServer> = { name, log: [], failProcess: [], jobs: new Map(), starts: new Map(), backends: [], peakSockets: 0 };
  const server = s as FakeServer;

  app.server.on('connection', (sock: Socket) => {
    if (dark) return void sock.destroy();
    sockets.add(sock);
    server.peakSockets = Math.max(server.peakSockets, sockets.size);
    sock.on('close', () => sockets.delete(sock));
  });
  app.addHook('onRequest', async (req, reply) => {
    if (dark) return void req.raw.socket.destroy();
    if (opts.token && req.headers.authorization !== `Bearer ${opts.token}`) {
      return reply.code(401).send({ error: { code: 'unauthorized', message: 'bearer token required' }, detail: 'bearer token required' });
    }
  });
  app.addHook('preHandler', async (req) => {
    server.log.push({ method: req.method, path: req.url, body: req.body, auth: req.headers.authorization });
  });

  const finish = (job: FakeJob, result: Result): void => {
    if (job.state !== 'run') return;
    job.state = result.critical_error === 'cancelled' ? 'cancelled' : 'done';
    job.result = result;
    if (job.timer) clearTimeout(job.timer);
    for (const w of job.waiters.splice(0)) w(result);
  };

  app.post('/process', async (req, reply) => {
    const fail = server.failProcess.shift();
    if (fail) {
      if (fail.retryAfter !== undefined) reply.header('retry-after', fail.retryAfter);
      const code = fail.code ?? 'queue_full';
      return reply.code(fail.status).send({ error: { code, message: `scripted ${fail.status}` }, detail: 'scripted' });
    }
    const body = ProcessRequest.parse(req.body);
    const id = body.job_id!;
    let job = body.attach ? server.jobs.get(id) : undefined;
    if (!job) {
      job = { id, state: 'run', waiters: [] };
      server.jobs.set(id, job);
      server.starts.set(id, (server.starts.get(id) ?? 0) + 1);
      const hold = Number((body.instance as Record<string, unknown>).hold_ms ?? 0);
      const j = job;
      // hold 0 ends at once, without a timer, so tests with fake timers need not advance them
      if (hold === 0) finish(j, makeResult(id, name));
      else if (hold > 0) j.timer = setTimeout(() => finish(j, makeResult(id, name)), hold);
    }
    if (job.result) return job.result;
    return new Promise<Result>((resolve) => job!.waiters.push(resolve));
  });
  app.post('/cancel', async (req) => {
    const id = (req.body as { job_id: string }).job_id;
    const job = server.jobs.get(id);
    if (!job) return { status: 'ok', job_id: id, cancelled: false, state: 'unknown' };
    const was = job.state;
    finish(job, makeResult(id, name, 'cancelled'));
    return { status: 'ok', job_id: id, cancelled: was === 'run', state: job.state === 'done' ? 'done' : 'cancelled' };
  });
  app.get('/jobs/:id', async (req, reply) => {
    const job = server.jobs.get((req.params as { id: string }).id);
    if (!job) return reply.code(404).send({ error: { code: 'job_not_found', message: 'unknown' }, detail: 'unknown' });
    return { job_id: job.id, state: job.state, ...(job.result ? { result: job.result } : {}) };
  });
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/status', async () => {
    const running = [...server.jobs.values()].filter((j) => j.state === 'run').length;
    const pool = { size: 4, busy: 0 };
    return {
      status: 'running',
      pending_jobs: running,
      running: true,
      jobs: running,
      init: 0,
      run: running,
      eval: 0,
      queued: 0,
      in_stage: running,
      queues: { init: 0, run: 0, eval: 0 },
      workers: { init: pool, run: pool, eval: pool },
      backends: server.backends,
    };
  });
  app.post('/add_llm_server', async (req) => {
    const b = req.body as { address: string; api?: 'vllm' | 'sglang'; weight_version?: string };
    server.backends = server.backends.filter((x) => x.address !== b.address);
    server.backends.push({ address: b.address, api: b.api ?? 'vllm', weight_version: b.weight_version ?? '0', active: 0, assigned: 0 });
    return { status: 'ok', backends: server.backends };
  });
  app.post('/remove_llm_server', async (req) => {
    const a = (req.body as { address: string }).address;
    server.backends = server.backends.filter((x) => x.address !== a);
    return { status: 'ok', backends: server.backends };
  });
  app.post('/clear_llm_server', async () => {
    server.backends = [];
    return { status: 'ok' };
  });
  app.post('/start', async () => ({ status: 'running' }));
  app.post('/stop', async () => ({ status: 'stopped' }));

  await app.listen({ port: opts.port ?? 0, host: opts.host ?? '127.0.0.1' });
  const addr = app.server.address() as { port: number; address: string };
  server.port = addr.port;
  server.url = `http://${addr.address}:${addr.port}`;
  server.openSockets = () => sockets.size;
  server.blackout = (on) => {
    dark = on;
    if (on) for (const sock of sockets) sock.destroy();
  };
  let closed: Promise<void> | undefined;
  server.crash = server.close = () => {
    closed ??= (async () => {
      for (const j of server.jobs.values()) if (j.timer) clearTimeout(j.timer);
      await app.close();
    })();
    return closed;
  };
  return server;
}
