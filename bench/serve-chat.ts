/**
 * `npm run bench:serve-chat`: one `raas serve` (the CLI, its own process) holding thousands of
 * concurrent `chat` jobs against `raas sim-llm` backends (their own processes). The simulators run
 * without queueing or slowdown (max_num_seqs above the jobs, concurrency_slowdown 0), so a job's
 * model time is exact from its result: turns × overhead_ms + decode_ms_per_token × generated tokens.
 * What a job waits beyond that is what the server (and the client's HTTP, the simulators' timers)
 * added. Measured at a low concurrency first (the floor: 100 jobs in flight), then with all jobs
 * submitted at once. Reports added latency p50/p99 for both, the server's RSS and V8 heap per job
 * in flight, its CPU per job and event-loop lag (its /metrics), and the load average.
 *
 * Each job in flight holds two sockets in the server (the held /process answer and its model
 * call): 10,000 jobs need `ulimit -n` above 20,000 for `raas serve`. When the limit is lower the
 * bench runs as many jobs as fit and says so.
 *
 * Flags: --jobs 10000  --turns 2  --decode-ms 100 (per generated token)  --tokens 100 (median per
 * turn)  --sims 2  --reps 1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fdLimit, pct } from './fleet-scale-run.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const here = path.dirname(new URL(import.meta.url).pathname);
const CLI = path.resolve(here, '../dist/src/cli.js');
const WANT = opt('--jobs', 10_000);
const TURNS = opt('--turns', 2);
const DECODE_MS = opt('--decode-ms', 100);
const OVERHEAD_MS = 2;
const TOKENS = opt('--tokens', 100);
const SIMS = opt('--sims', 2);
const REPS = opt('--reps', 1);
const FLOOR_JOBS = 100;
/** RAAS_BENCH_PROFILE=<dir>: the server writes a V8 CPU profile there when it exits (bench/profile-top.ts reads it). */
const prof = process.env.RAAS_BENCH_PROFILE;

interface Started {
  proc: ChildProcess;
  url: string;
}

/** Starts a CLI command and waits for its "listening on <url>" line. */
async function startCli(argv: string[], node: string[] = []): Promise<Started> {
  const proc = spawn(process.execPath, [...node, CLI, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: proc.stdout! });
    lines.on('line', (l) => {
      const m = /listening on (http:\/\/\S+)/.exec(l);
      if (m) resolve(m[1]!);
    });
    proc.once('exit', (c) => reject(new Error(`${argv[0]} exited with ${c}`)));
  });
  return { proc, url };
}

function stop(p: Started): Promise<void> {
  return new Promise((r) => {
    if (p.proc.exitCode !== null) return r();
    p.proc.once('exit', () => r());
    p.proc.kill('SIGTERM');
  });
}

function procStatus(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

function procCpuS(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

function call(url: string, method: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(text) : reject(new Error(`${method} ${url}: ${res.statusCode} ${text.slice(0, 200)}`)),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Reads the server's /metrics once (its event-loop figures cover the time since the last read). */
async function metrics(server: string): Promise<(name: string) => number> {
  const text = await call(`${server}/metrics`, 'GET');
  return (name) => metric(text, name);
}

/** A metric from Prometheus text, or NaN. */
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

interface JobOutcome {
  latency_ms: number;
  model_ms: number;
}

async function job(server: string, id: string): Promise<JobOutcome> {
  const body = JSON.stringify({
    instance: { data_source: 'chat', instance_id: id, turns: TURNS, pass_rate: 0.5 },
    sampling_params: { max_tokens_per_turn: 4096 },
    job_id: id,
  });
  const t0 = performance.now();
  const r = JSON.parse(await call(`${server}/process`, 'POST', body)) as {
    critical_error: string | null;
    num_turns: number;
    tokens: { response_mask: number[] };
  };
  const latency = performance.now() - t0;
  if (r.critical_error !== null) throw new Error(`job ${id}: critical_error ${r.critical_error}`);
  let generated = 0;
  for (const m of r.tokens.response_mask) generated += m;
  return { latency_ms: latency, model_ms: r.num_turns * OVERHEAD_MS + generated * DECODE_MS };
}

/** `total` jobs with at most `concurrent` in flight. */
async function drive(server: string, tag: string, total: number, concurrent: number): Promise<JobOutcome[]> {
  const out: JobOutcome[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrent }, async () => {
      while (next < total) out.push(await job(server, `${tag}-${next++}`));
    }),
  );
  return out;
}

interface Rep {
  jobs: number;
  floor_added_p50_ms: number;
  floor_added_p99_ms: number;
  added_p50_ms: number;
  added_p99_ms: number;
  latency_p99_ms: number;
  model_p50_ms: number;
  in_flight_peak: number;
  rss_idle_mb: number;
  rss_peak_mb: number;
  rss_kb_per_job: number;
  heap_kb_per_job: number;
  server_cpu_us_per_job: number;
  loop_lag_p99_ms: number;
  load_avg: number;
}

async function rep(server: Started, jobs: number, r: number): Promise<Rep> {
  const floor = await drive(server.url, `floor${r}`, 3 * FLOOR_JOBS, FLOOR_JOBS);
  const added = (o: JobOutcome[]) => o.map((x) => x.latency_ms - x.model_ms);
  const pid = server.proc.pid!;
  const idle = procStatus(pid);
  const heapIdle = (await metrics(server.url))('nodejs_heap_size_used_bytes');
  const cpu0 = procCpuS(pid);
  // Peaks over the phase, each on its own: the RSS high-water mark (reset now), the V8 heap, the jobs.
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  const peak = { jobs: 0, heap: 0, lag: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const st = JSON.parse(await call(`${server.url}/status`, 'GET')) as { jobs: number };
      peak.jobs = Math.max(peak.jobs, st.jobs);
      const m = await metrics(server.url);
      peak.heap = Math.max(peak.heap, m('nodejs_heap_size_used_bytes'));
      peak.lag = Math.max(peak.lag, m('nodejs_eventloop_lag_p99_seconds'));
      await new Promise((res) => setTimeout(res, 500));
    }
  })();
  const all = await drive(server.url, `all${r}`, jobs, jobs);
  sampling = false;
  await sampler;
  const cpu = procCpuS(pid) - cpu0;
  return {
    jobs,
    floor_added_p50_ms: pct(added(floor), 50),
    floor_added_p99_ms: pct(added(floor), 99),
    added_p50_ms: pct(added(all), 50),
    added_p99_ms: pct(added(all), 99),
    latency_p99_ms: pct(
      all.map((x) => x.latency_ms),
      99,
    ),
    model_p50_ms: pct(
      all.map((x) => x.model_ms),
      50,
    ),
    in_flight_peak: peak.jobs,
    rss_idle_mb: idle.rss / 2 ** 20,
    rss_peak_mb: procStatus(pid).hwm / 2 ** 20,
    rss_kb_per_job: (procStatus(pid).hwm - idle.rss) / 1024 / Math.max(1, peak.jobs),
    heap_kb_per_job: (peak.heap - heapIdle) / 1024 / Math.max(1, peak.jobs),
    server_cpu_us_per_job: (cpu * 1e6) / jobs,
    loop_lag_p99_ms: peak.lag * 1000,
    load_avg: loadavg()[0]!,
  };
}

async function main(): Promise<void> {
  const limit = fdLimit();
  // Two sockets per job in the server, plus its files, the journal, the tokenizer workers.
  const jobs = Math.min(WANT, Math.floor((limit - 1024) / 2));
  const cmd = `npm run bench:serve-chat -- ${args.join(' ')}`.trim();
  const load0 = loadavg();
  process.stderr.write(
    `bench:serve-chat: ${jobs} concurrent chat jobs (${TURNS} turns, ~${TOKENS} tokens/turn at ${DECODE_MS} ms/token), ${SIMS} simulators; ulimit -n ${limit}; ${cpus().length} cores, load ${load0.map((l) => l.toFixed(2)).join(' ')}\n  ${cmd}\n`,
  );
  if (jobs < WANT)
    process.stderr.write(`  ${WANT} jobs need ulimit -n ≥ ${2 * WANT + 1024} for raas serve (have ${limit}): running ${jobs}\n`);
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-serve-chat-'));
  const simCfg = path.join(dir, 'sim.yaml');
  writeFileSync(
    simCfg,
    JSON.stringify({
      latency: {
        prefill_ms_per_token: 0,
        decode_ms_per_token: DECODE_MS,
        overhead_ms: OVERHEAD_MS,
        concurrency_slowdown: 0,
        max_num_seqs: 1_000_000,
      },
      filler: { median_tokens: TOKENS, sigma: 0.5, min_tokens: 4, max_tokens: 8 * TOKENS },
    }),
  );
  const sims: Started[] = [];
  let server: Started | undefined;
  try {
    for (let i = 0; i < SIMS; i++)
      sims.push(await startCli(['sim-llm', '--port', '0', '--seed', String(i), '--no-bundled-datasets', '--config', simCfg]));
    const w = String(jobs + FLOOR_JOBS);
    server = await startCli(
      [
        'serve',
        '--port',
        '0',
        '--log-level',
        'error',
        '--llm',
        ...sims.map((s) => s.url),
        '--workers-init',
        w,
        '--workers-run',
        w,
        '--workers-eval',
        w,
        '--set',
        `max_queued_jobs=${2 * jobs}`,
      ],
      prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : [],
    );
    const reps: Rep[] = [];
    for (let r = 0; r < REPS; r++) {
      const x = await rep(server, jobs, r);
      process.stderr.write(
        `  rep ${r}: ${x.in_flight_peak} in flight at the peak; added p50/p99 ${x.added_p50_ms.toFixed(0)}/${x.added_p99_ms.toFixed(0)} ms (floor at ${FLOOR_JOBS}: ${x.floor_added_p50_ms.toFixed(0)}/${x.floor_added_p99_ms.toFixed(0)} ms) on a model time of ${x.model_p50_ms.toFixed(0)} ms (p50); RSS ${x.rss_idle_mb.toFixed(0)} → ${x.rss_peak_mb.toFixed(0)} MB, ${x.rss_kb_per_job.toFixed(1)} KB/job, heap ${x.heap_kb_per_job.toFixed(1)} KB/job; server CPU ${x.server_cpu_us_per_job.toFixed(0)} µs/job; event-loop lag p99 ${x.loop_lag_p99_ms.toFixed(0)} ms; load ${x.load_avg.toFixed(1)}\n`,
      );
      reps.push(x);
    }
    const med = (f: (x: Rep) => number): number => pct(reps.map(f), 50);
    process.stdout.write(
      `\n| jobs in flight | added p50 ms | added p99 ms | floor (${FLOOR_JOBS} in flight) p99 ms | RSS KB/job | heap KB/job | server CPU µs/job | loop lag p99 ms | load |\n|---|---|---|---|---|---|---|---|---|\n| ${med((x) => x.in_flight_peak)} | ${med((x) => x.added_p50_ms).toFixed(0)} | ${med((x) => x.added_p99_ms).toFixed(0)} | ${med((x) => x.floor_added_p99_ms).toFixed(0)} | ${med((x) => x.rss_kb_per_job).toFixed(1)} | ${med((x) => x.heap_kb_per_job).toFixed(1)} | ${med((x) => x.server_cpu_us_per_job).toFixed(0)} | ${med((x) => x.loop_lag_p99_ms).toFixed(0)} | ${med((x) => x.load_avg).toFixed(1)} |\ncommand: ${cmd}; ulimit -n ${limit}; load average at start ${load0.map((l) => l.toFixed(2)).join(' ')}\n`,
    );
    mkdirSync(path.join(here, 'results'), { recursive: true });
    writeFileSync(
      path.join(here, 'results', 'serve-chat.json'),
      `${JSON.stringify({ bench: 'serve-chat', date: new Date().toISOString(), command: cmd, ulimit_n: limit, load_avg_start: load0, reps }, null, 2)}\n`,
    );
  } finally {
    agent.destroy();
    if (server) await stop(server);
    await Promise.all(sims.map(stop));
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:serve-chat failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
