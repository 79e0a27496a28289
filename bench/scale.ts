/**
 * `npm run bench:scale`: one coordinator driving 1, 2, 4 and 8 rollout servers, each on its own
 * loopback address (127.0.0.2, 127.0.0.3, …, standing for nodes) with its own simulated vLLM backend
 * on the same address (so placement pairs them node-affinely, phase 1). The servers and simulators
 * run in one child process per node, so this process's CPU time is the coordinator's alone. Latencies are long
 * (25 ms per token) so the whole run stays under half a core: it measures coordination, not this
 * machine's 2 cores. Weak scaling: batch_size = 4 × servers.
 * Reports informative groups/s, scaling efficiency (throughput per server relative to 1 server) and
 * the coordinator's CPU time per job; writes bench/results/scale.json and scale.svg.
 * Flags: --quick (1, 2, 4 servers; 3 steps); --slurm (on Slurm nodes: bench/scale-slurm.ts). Internal: --infra K (the child).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Coordinator } from '../src/dapo/index.js';
import { lineChartSvg } from '../src/dapo/plot.js';
import type { Batch } from '../src/protocol/batch.js';
import { rng } from '../src/util/hash.js';

const args = process.argv.slice(2);
const here = path.dirname(new URL(import.meta.url).pathname);
const LATENCY = { prefill_ms_per_token: 0.05, decode_ms_per_token: 25, overhead_ms: 5, concurrency_slowdown: 0, max_num_seqs: 256 };
const FILLER = { median_tokens: 40, sigma: 0.5, min_tokens: 4, max_tokens: 400 };
const RUN_WORKERS = 8;
const N = 4;
const SEED = 5;

/** A child ("node" i): one simulator and one rollout server on 127.0.0.(2+i); prints their URLs, exits when stdin closes. */
async function infra(node: number): Promise<void> {
  const { startRolloutServer } = await import('../src/server/index.js');
  const { startSim } = await import('../src/sim/index.js');
  const closers: Array<() => Promise<void>> = [];
  const servers: string[] = [];
  const backends: string[] = [];
  for (const i of [node]) {
    const host = `127.0.0.${2 + i}`;
    const sim = await startSim({ host, seed: SEED, latency: LATENCY, filler: FILLER, abort_on_weight_update: false, weight_version: '0' });
    const srv = await startRolloutServer({
      host,
      port: 0,
      workers: { init: RUN_WORKERS, run: RUN_WORKERS, eval: RUN_WORKERS },
      log_level: 'silent',
    } as never);
    closers.push(
      () => srv.close(),
      () => sim.close(),
    );
    servers.push(srv.url);
    backends.push(sim.url);
  }
  process.stdout.write(JSON.stringify({ servers, backends }) + '\n');
  const stop = async (): Promise<void> => {
    for (const c of closers) await c().catch(() => {});
    process.exit(0);
  };
  process.stdin.on('end', () => void stop());
  process.stdin.resume();
  process.on('SIGTERM', () => void stop());
}

function writeDataset(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-scale-'));
  const r = rng(SEED);
  const rows = Array.from({ length: 2000 }, (_, i) => {
    const u = r();
    return JSON.stringify({
      data_source: 'chat',
      instance_id: `s${i}`,
      turns: 1 + Math.floor(r() * 2),
      pass_rate: u < 0.25 ? 0 : u < 0.5 ? 1 : 0.5,
    });
  });
  const file = path.join(dir, 'prompts.jsonl');
  writeFileSync(file, rows.join('\n') + '\n');
  return file;
}

interface Point {
  servers: number;
  batch_size: number;
  informative_groups_per_s: number;
  /** Completed rollouts per second (independent of how many groups happened to be informative). */
  rollouts_per_s: number;
  scaling_efficiency: number;
  rollout_scaling_efficiency: number;
  coordinator_cpu_ms_per_job: number;
  jobs: number;
  wall_s: number;
  infra_cpu_s: number;
  worker_utilization: number;
}

async function measure(
  k: number,
  steps: number,
  dataset: string,
): Promise<Omit<Point, 'scaling_efficiency' | 'rollout_scaling_efficiency'>> {
  // One child process per node, as on a cluster: no node shares an event loop with another.
  const children = Array.from({ length: k }, (_, i) =>
    spawn(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname, '--infra', String(i)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  const lines = await Promise.all(
    children.map(
      (child) =>
        new Promise<string>((resolve, reject) => {
          createInterface({ input: child.stdout! }).once('line', resolve);
          child.once('exit', (c) => reject(new Error(`infra exited with ${c}`)));
        }),
    ),
  );
  const servers = lines.flatMap((l) => (JSON.parse(l) as { servers: string[] }).servers);
  const backends = lines.flatMap((l) => (JSON.parse(l) as { backends: string[] }).backends);
  const B = 4 * k;
  const c = new Coordinator({
    name: `scale-${k}`,
    seed: SEED,
    servers: servers.map((url) => ({ url })),
    backends: backends.map((address) => ({ address, api: 'vllm' as const })),
    dataset: { path: dataset },
    n: N,
    batch_size: B,
    steps,
  });
  try {
    await c.start();
    await c.nextBatch(); // warm-up step (tokenizers, connections) is not measured
    await c.updateWeights({});
    const cpu0 = process.cpuUsage();
    const jobs0 = c.status().totals.jobs_submitted;
    const t0 = performance.now();
    const batches: Batch[] = [];
    for (let s = 0; s < steps; s++) {
      batches.push(await c.nextBatch());
      await c.updateWeights({});
    }
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const jobs = c.status().totals.jobs_submitted - jobs0;
    const childCpu = (await Promise.all(children.map((c) => childCpuSeconds(c.pid!)))).reduce((a, b) => a + b, 0);
    const completed = batches.reduce((a, b) => a + b.stats.completed, 0) * N;
    const util =
      batches.reduce((a, b) => a + b.stats.worker_utilization * b.stats.wall_s, 0) / batches.reduce((a, b) => a + b.stats.wall_s, 0);
    return {
      servers: k,
      batch_size: B,
      informative_groups_per_s: (B * steps) / wall,
      rollouts_per_s: completed / wall,
      coordinator_cpu_ms_per_job: (cpu.user + cpu.system) / 1000 / Math.max(1, jobs),
      jobs,
      wall_s: wall,
      infra_cpu_s: childCpu,
      worker_utilization: util,
    };
  } finally {
    await c.close();
    await Promise.all(
      children.map((child) => {
        child.stdin!.end();
        return new Promise((r) => child.once('exit', r));
      }),
    );
  }
}

/** utime + stime of a process from /proc (Linux), in seconds. */
async function childCpuSeconds(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  return (Number(stat[11]) + Number(stat[12])) / 100;
}

async function main(): Promise<void> {
  const quick = args.includes('--quick');
  const steps = quick ? 3 : 5;
  const ks = quick ? [1, 2, 4] : [1, 2, 4, 8];
  const dataset = writeDataset();
  process.stderr.write(
    `bench:scale: servers ${ks.join(', ')}; ${RUN_WORKERS} RUN workers each; n=${N}; batch_size 4×servers; ${steps} measured steps; decode ${LATENCY.decode_ms_per_token} ms/token\n`,
  );
  const pts: Point[] = [];
  for (const k of ks) {
    const m = await measure(k, steps, dataset);
    const base = pts[0] ?? m;
    const p = {
      ...m,
      scaling_efficiency: m.informative_groups_per_s / (k * base.informative_groups_per_s),
      rollout_scaling_efficiency: m.rollouts_per_s / (k * base.rollouts_per_s),
    };
    pts.push(p);
    process.stderr.write(
      `  ${k} server(s): ${p.informative_groups_per_s.toFixed(2)} groups/s, efficiency ${(p.scaling_efficiency * 100).toFixed(0)}% (rollouts ${p.rollouts_per_s.toFixed(1)}/s, ${(p.rollout_scaling_efficiency * 100).toFixed(0)}%), coordinator ${p.coordinator_cpu_ms_per_job.toFixed(2)} ms CPU/job, util ${(p.worker_utilization * 100).toFixed(0)}%, infra CPU ${p.infra_cpu_s.toFixed(1)} s over ${p.wall_s.toFixed(1)} s\n`,
    );
  }
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(
    path.join(here, 'results', 'scale.json'),
    JSON.stringify(
      {
        bench: 'scale',
        date: new Date().toISOString(),
        steps,
        n: N,
        run_workers_per_server: RUN_WORKERS,
        latency: LATENCY,
        filler: FILLER,
        points: pts,
      },
      null,
      2,
    ) + '\n',
  );
  writeFileSync(
    path.join(here, 'results', 'scale.svg'),
    lineChartSvg('bench:scale — informative groups/s and scaling efficiency vs servers (x = 1, 2, 4, 8)', 'point (1, 2, 4, 8 servers)', [
      { name: 'informative groups/s', color: '#1f77b4', values: pts.map((p) => p.informative_groups_per_s) },
      { name: 'scaling efficiency', color: '#2ca02c', values: pts.map((p) => p.scaling_efficiency) },
    ]),
  );
  process.stdout.write(
    '\n| servers | batch_size | informative groups/s | scaling efficiency | rollouts/s | rollout scaling efficiency | coordinator CPU ms/job | worker util |\n|---|---|---|---|---|---|---|---|\n',
  );
  for (const p of pts)
    process.stdout.write(
      `| ${p.servers} | ${p.batch_size} | ${p.informative_groups_per_s.toFixed(2)} | ${(p.scaling_efficiency * 100).toFixed(0)}% | ${p.rollouts_per_s.toFixed(1)} | ${(p.rollout_scaling_efficiency * 100).toFixed(0)}% | ${p.coordinator_cpu_ms_per_job.toFixed(2)} | ${(p.worker_utilization * 100).toFixed(0)}% |\n`,
    );
}

if (args.includes('--slurm')) {
  // The same weak-scaling question on a real (local) Slurm cluster, through configs/slurm/raas.sbatch.
  import('./scale-slurm.js')
    .then((m) => m.main(args))
    .catch((err) => {
      process.stderr.write(`bench:scale --slurm failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    });
} else if (args[0] === '--infra') {
  infra(Number(args[1])).catch((err) => {
    process.stderr.write(`infra failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    process.stderr.write(`bench:scale failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
