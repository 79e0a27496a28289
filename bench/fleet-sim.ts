/**
 * Simulated rollout servers for `bench:fleet-scale`, many per process: each is a real node:http
 * server on port 0 that keeps the rollout server's wire (src/protocol shapes) for what a coordinator
 * uses: POST /process held until the job ends (`attach: true` joins the job of that id), POST
 * /cancel (the held answer returns `critical_error: "cancelled"`), GET /jobs/:id, GET /status,
 * GET /health. Behind it, `workers` RUN slots and a FIFO queue; a job holds a slot for a lognormal
 * duration drawn from its id (so every run and every placement draws the same), and its reward is
 * drawn from the instance's `pass_rate`. Results carry `sim: {arrived_at, answered_at}` (epoch ms)
 * so the driver can time admission and result transit; the Result schema keeps unknown keys.
 *
 * Usage: `tsx bench/fleet-sim.ts '<json SimSpec>'`; prints `{"urls": [...]}` on stdout, then answers
 * each line `stats` on stdin with one JSON line of totals; exits when stdin ends.
 */
import http from 'node:http';
import { createInterface } from 'node:readline';
import { rng, seedOf } from '../src/util/hash.js';

export interface SimSpec {
  count: number;
  /** RUN slots per server. */
  workers: number;
  /** Lognormal rollout duration: median (s) and σ. */
  median_s: number;
  sigma: number;
  /** Lognormal response length in tokens: median, σ, cap. */
  tokens: { median: number; sigma: number; max: number };
  seed: number;
  /** Loopback address to bind (spread over 127.x.y.z so no address runs out of ports). */
  host: string;
}

/** Totals one sim process reports on `stats`. */
export interface SimStats {
  started: number;
  finished: number;
  cancelled: number;
  attached: number;
  /** Σ over servers of busy slot-seconds, and of slot-seconds (workers × time since the first job). */
  busy_s: number;
  slots_s: number;
  /** Sockets open now. */
  sockets: number;
}

interface Job {
  id: string;
  state: 'queued' | 'run' | 'done' | 'cancelled';
  arrived: number;
  started: number;
  duration: number;
  reward: number;
  tokens: number;
  timer?: NodeJS.Timeout;
  waiters: http.ServerResponse[];
  body?: string;
}

const epochMs = (): number => performance.timeOrigin + performance.now();

/** Response-id arrays, pre-serialised by length bucket (the sims must stay cheap next to the coordinator). */
function tokenJson(len: number): { ids: string; mask: string; lp: string; text: string } {
  const ids = Array.from({ length: len }, (_, i) => 1000 + ((i * 7919) % 50_000));
  return {
    ids: JSON.stringify(ids),
    mask: JSON.stringify(ids.map(() => 1)),
    lp: JSON.stringify(ids.map((_, i) => -((i % 97) / 50))),
    // About 4.5 characters per token, as the chat handler's answers have.
    text: JSON.stringify('lorem ipsum dolor sit amet, '.repeat(Math.ceil((len * 4.5) / 28)).slice(0, Math.round(len * 4.5))),
  };
}

const cache = new Map<number, ReturnType<typeof tokenJson>>();
/** Lengths rounded to 16 tokens share one serialisation. */
function tokensOf(len: number): ReturnType<typeof tokenJson> {
  const b = Math.max(16, Math.round(len / 16) * 16);
  let t = cache.get(b);
  if (!t) cache.set(b, (t = tokenJson(b)));
  return t;
}
const PROMPT = JSON.stringify(Array.from({ length: 128 }, (_, i) => 151_644 + (i % 7)));

function resultBody(job: Job, instance: unknown, traj: unknown, cancelled: boolean, now: number): string {
  const t = tokensOf(cancelled ? Math.max(16, Math.round(job.tokens * 0.5)) : job.tokens);
  const run = job.started > 0 ? (now - job.started) / 1000 : 0;
  const queued = ((job.started > 0 ? job.started : now) - job.arrived) / 1000;
  const reward = cancelled ? 0 : job.reward;
  const ce = cancelled ? '"cancelled"' : 'null';
  return (
    `{"instance_id":${JSON.stringify(instance ?? null)},"trajectory_id":${JSON.stringify(traj ?? null)},"git_patch":null,` +
    `"success":${!cancelled},"finish":true,"messages":[{"role":"user","content":"Say something."},{"role":"assistant","content":${t.text}}],"tools":[],` +
    `"end_properly":${!cancelled},"resolved":${reward > 0},"critical_error":${ce},"filter":${cancelled},"error":null,` +
    `"job_id":${JSON.stringify(job.id)},"data_source":"chat","reward":${reward},"finish_reason":"${cancelled ? 'cancelled' : 'finish'}",` +
    `"backend":"sim","policy_version":0,"weight_versions":["0"],"num_turns":1,` +
    `"timing":{"init_time":0,"run_time":${run},"eval_time":0,"others_time":${queued},"counted_elapsed":${run},"timeout_triggered":false,` +
    `"queued_s":${queued},"init_s":0,"run_s":${run},"eval_s":0,"counted_s":${run}},` +
    `"tokens":{"prompt_ids":${PROMPT},"response_ids":${t.ids},"response_mask":${t.mask},"logprobs":${t.lp}},` +
    `"sim":{"arrived_at":${job.arrived},"answered_at":${epochMs()}}}`
  );
}

function send(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const notFound = (what: string): string => JSON.stringify({ error: { code: 'job_not_found', message: what }, detail: what });

/** One simulated rollout server. */
class SimServer {
  readonly jobs = new Map<string, Job>();
  private readonly queue: Job[] = [];
  private qHead = 0;
  busy = 0;
  busyMs = 0;
  private lastAt = 0;
  firstAt = 0;
  readonly totals = { started: 0, finished: 0, cancelled: 0, attached: 0 };
  readonly server: http.Server;
  /** Instance fields of each job's request, for its result. */
  private readonly meta = new Map<string, { instance: unknown; traj: unknown }>();

  constructor(private readonly spec: SimSpec) {
    this.server = http.createServer({ keepAliveTimeout: 120_000 }, (req, res) => this.route(req, res));
    this.server.headersTimeout = 0;
    this.server.requestTimeout = 0;
  }

  private integrate(now: number): void {
    if (this.lastAt) this.busyMs += this.busy * (now - this.lastAt);
    this.lastAt = now;
  }

  private route(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = req.url ?? '/';
    if (req.method === 'GET') {
      if (url === '/health') return send(res, 200, '{"status":"ok"}');
      if (url === '/status') return send(res, 200, this.status());
      if (url.startsWith('/jobs/')) return this.job(decodeURIComponent(url.slice(6)), res);
      return send(res, 404, notFound(url));
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      let json: { job_id?: string; attach?: boolean; instance?: Record<string, unknown> };
      try {
        json = JSON.parse(body || '{}');
      } catch {
        return send(res, 400, JSON.stringify({ error: { code: 'bad_request', message: 'body is not JSON' }, detail: 'not JSON' }));
      }
      if (url === '/process') return this.process(json, res);
      if (url === '/cancel') return this.cancel(String(json.job_id ?? ''), res);
      if (url === '/add_llm_server' || url === '/clear_llm_server' || url === '/remove_llm_server')
        return send(res, 200, '{"status":"ok","backends":[]}');
      return send(res, 404, notFound(url));
    });
  }

  private status(): string {
    let queued = 0;
    for (let i = this.qHead; i < this.queue.length; i++) if (this.queue[i]!.state === 'queued') queued++;
    const jobs = queued + this.busy;
    const pool = (size: number, busy: number) => ({ size, busy });
    return JSON.stringify({
      status: 'running',
      pending_jobs: jobs,
      running: true,
      jobs,
      init: 0,
      run: this.busy,
      eval: 0,
      queued,
      in_stage: this.busy,
      queues: { init: 0, run: queued, eval: 0 },
      workers: { init: pool(this.spec.workers, 0), run: pool(this.spec.workers, this.busy), eval: pool(this.spec.workers, 0) },
      backends: [],
    });
  }

  private process(json: { job_id?: string; attach?: boolean; instance?: Record<string, unknown> }, res: http.ServerResponse): void {
    const id = json.job_id;
    if (!id) return send(res, 400, JSON.stringify({ error: { code: 'bad_request', message: 'job_id' }, detail: 'job_id' }));
    const old = json.attach ? this.jobs.get(id) : undefined;
    if (old) {
      this.totals.attached++;
      if (old.body) return send(res, 200, old.body);
      old.waiters.push(res);
      return;
    }
    const now = epochMs();
    if (!this.firstAt) this.firstAt = now;
    const r = rng(seedOf(this.spec.seed, id));
    // Box–Muller: a standard normal from two uniforms.
    const z = (): number => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
    const pass = Number(json.instance?.pass_rate ?? 0.5);
    const t = this.spec.tokens;
    const job: Job = {
      id,
      state: 'queued',
      arrived: now,
      started: 0,
      duration: this.spec.median_s * 1000 * Math.exp(this.spec.sigma * z()),
      reward: r() < pass ? 1 : 0,
      tokens: Math.min(t.max, Math.max(16, Math.round(t.median * Math.exp(t.sigma * z())))),
      waiters: [res],
    };
    this.meta.set(id, { instance: json.instance?.instance_id, traj: json.instance?.trajectory_id });
    this.jobs.set(id, job);
    this.totals.started++;
    this.queue.push(job);
    this.pump();
  }

  private pump(): void {
    while (this.busy < this.spec.workers && this.qHead < this.queue.length) {
      const job = this.queue[this.qHead++]!;
      if (job.state !== 'queued') continue;
      const now = epochMs();
      this.integrate(now);
      this.busy++;
      job.state = 'run';
      job.started = now;
      job.timer = setTimeout(() => this.end(job, false), job.duration);
    }
    if (this.qHead > 1024 && this.qHead * 2 > this.queue.length) {
      this.queue.splice(0, this.qHead);
      this.qHead = 0;
    }
  }

  private end(job: Job, cancelled: boolean): void {
    if (job.state === 'done' || job.state === 'cancelled') return;
    const now = epochMs();
    if (job.state === 'run') {
      this.integrate(now);
      this.busy--;
      clearTimeout(job.timer);
    }
    job.state = cancelled ? 'cancelled' : 'done';
    if (cancelled) this.totals.cancelled++;
    else this.totals.finished++;
    const m = this.meta.get(job.id);
    this.meta.delete(job.id);
    job.body = resultBody(job, m?.instance, m?.traj, cancelled, now);
    for (const w of job.waiters.splice(0)) send(w, 200, job.body);
    // Kept for attach and GET /jobs/:id for a minute (a server's result_ttl_s), then forgotten.
    setTimeout(() => this.jobs.delete(job.id), 60_000).unref();
    this.pump();
  }

  private cancel(id: string, res: http.ServerResponse): void {
    const job = this.jobs.get(id);
    if (!job) return send(res, 200, JSON.stringify({ status: 'ok', job_id: id, cancelled: false, state: 'unknown' }));
    const live = job.state === 'queued' || job.state === 'run';
    if (live) this.end(job, true);
    send(res, 200, JSON.stringify({ status: 'ok', job_id: id, cancelled: live, state: job.state }));
  }

  private job(id: string, res: http.ServerResponse): void {
    const job = this.jobs.get(id);
    if (!job) return send(res, 404, notFound(`job ${id}`));
    const state = job.state === 'queued' ? 'queued_run' : job.state;
    send(
      res,
      200,
      job.body ? `{"job_id":${JSON.stringify(id)},"state":"${state}","result":${job.body}}` : JSON.stringify({ job_id: id, state }),
    );
  }

  stats(now: number): { busy_s: number; slots_s: number } {
    this.integrate(now);
    return { busy_s: this.busyMs / 1000, slots_s: this.firstAt ? (this.spec.workers * (now - this.firstAt)) / 1000 : 0 };
  }
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as SimSpec;
  const servers: SimServer[] = [];
  let sockets = 0;
  for (let i = 0; i < spec.count; i++) {
    const s = new SimServer(spec);
    s.server.on('connection', (sock) => {
      sockets++;
      sock.on('close', () => sockets--);
    });
    await new Promise<void>((r) => s.server.listen(0, spec.host, r));
    servers.push(s);
  }
  const urls = servers.map((s) => `http://${spec.host}:${(s.server.address() as { port: number }).port}`);
  process.stdout.write(`${JSON.stringify({ urls })}\n`);
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line.trim() !== 'stats') return;
    const now = epochMs();
    const out: SimStats = { started: 0, finished: 0, cancelled: 0, attached: 0, busy_s: 0, slots_s: 0, sockets };
    for (const s of servers) {
      for (const k of ['started', 'finished', 'cancelled', 'attached'] as const) out[k] += s.totals[k];
      const b = s.stats(now);
      out.busy_s += b.busy_s;
      out.slots_s += b.slots_s;
    }
    process.stdout.write(`${JSON.stringify(out)}\n`);
  });
  const stop = (): void => {
    for (const s of servers) s.server.closeAllConnections();
    void Promise.all(servers.map((s) => new Promise((r) => s.server.close(r)))).then(() => process.exit(0));
  };
  process.stdin.on('end', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`fleet-sim: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
