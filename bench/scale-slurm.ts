/**
 * `npm run bench:scale -- --slurm`: DAPO throughput on 1, 2, 4 and 8 Slurm nodes of a local cluster
 * (scripts/slurm-cluster.sh, as root), each point one job of the real template
 * (configs/slurm/raas.sbatch) with the simulated inference server: on every node one `raas serve`
 * and one `raas sim-llm` on the node's own address, the coordinator on the first node. Weak
 * scaling: the same workload per node (RUN_WORKERS rollout workers, batch_size = 12 × nodes).
 * Latencies are long (a slow simulated model) so that 8 nodes' servers stay well under this
 * machine's 2 cores: this measures coordination and placement across nodes, not the machine.
 * Points run in rotated order, REPS times; medians with min–max. Writes bench/results/scale-slurm.json.
 * Flags: --quick (1 and 2 nodes, 1 repetition), --reps K, --steps S.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { rng } from '../src/util/hash.js';

const here = path.dirname(new URL(import.meta.url).pathname);
const ROOT = path.resolve(here, '..');
const TEMPLATE = path.join(ROOT, 'configs/slurm/raas.sbatch');
const CLUSTER = path.join(ROOT, 'scripts/slurm-cluster.sh');
const LATENCY = { prefill_ms_per_token: 0, decode_ms_per_token: 250, overhead_ms: 5, concurrency_slowdown: 0, max_num_seqs: 256 };
const FILLER = { median_tokens: 40, sigma: 0.5, min_tokens: 4, max_tokens: 160 };
const RUN_WORKERS = 48;
const N = 4;
/**
 * Groups per step per node. Admission keeps at most (max_staleness + 1) × batch_size groups running
 * or buffered, so batch_size must be at least half of a node's capacity in groups (48 / 4 = 12) for
 * the workers, not the staleness window, to bound admission.
 */
const GROUPS_PER_NODE = 12;
const SEED = 5;

interface Point {
  nodes: number;
  rep: number;
  batch_size: number;
  informative_groups_per_s: number;
  rollouts_per_s: number;
  worker_utilization: number;
  measured_s: number;
  job_s: number;
  load_before: number;
  load_after: number;
  /** CPU seconds of the nodes' raas serve and sim-llm processes over the whole job (sampled from /proc). */
  infra_cpu_s: number;
  /** Per measured step: wall seconds and worker utilization. */
  steps: Array<{ wall_s: number; worker_utilization: number }>;
}

const sh = (cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string =>
  execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...opts }).trim();

/** Base config, sim config and dataset of one point, in `dir`. */
function writeInputs(dir: string, k: number, steps: number): { base: string; sim: string } {
  const r = rng(SEED);
  // Every prompt has pass rate 0.5, so 7 in 8 groups of 4 are informative: the step's length does
  // not hang on which prompts a run happened to draw.
  const rows = Array.from({ length: 4000 }, (_, i) =>
    JSON.stringify({ data_source: 'chat', instance_id: `s${i}`, turns: 1 + Math.floor(r() * 2), pass_rate: 0.5 }),
  );
  writeFileSync(path.join(dir, 'prompts.jsonl'), rows.join('\n') + '\n');
  const base = path.join(dir, 'train.yaml');
  writeFileSync(
    base,
    [
      `name: scale-slurm-${k}`,
      `seed: ${SEED}`,
      'dataset: {path: prompts.jsonl}',
      `n: ${N}`,
      `batch_size: ${GROUPS_PER_NODE * k}`,
      `steps: ${steps + 1}`,
      'mode: async',
      'carry_over: true',
      'max_staleness: 1',
      'trainer: {update_weights: true}',
      '',
    ].join('\n'),
  );
  const sim = path.join(dir, 'sim.yaml');
  writeFileSync(
    sim,
    [`seed: ${SEED}`, 'abort_on_weight_update: false', `latency: ${JSON.stringify(LATENCY)}`, `filler: ${JSON.stringify(FILLER)}`, ''].join(
      '\n',
    ),
  );
  return { base, sim };
}

/** One job on `k` nodes; its first step is warm-up, the rest are measured. */
async function measure(k: number, rep: number, steps: number): Promise<Point> {
  const dir = mkdtempSync(path.join(tmpdir(), `raas-bench-slurm-${k}-`));
  try {
    const { base, sim } = writeInputs(dir, k, steps);
    const env = {
      ...process.env,
      RAAS_HOME: ROOT,
      LAUNCHER: 'sim',
      SIM_CONFIG: sim,
      JOURNAL_DIR: path.join(dir, 'journal'),
      SERVE_ARGS: `--workers-init ${RUN_WORKERS} --workers-run ${RUN_WORKERS} --workers-eval ${RUN_WORKERS}`,
    };
    const loadBefore = loadavg()[0];
    const t0 = performance.now();
    const id = sh('sbatch', ['--parsable', `--nodes=${k}`, '--gpus-per-node=0', '--cpus-per-task=1', TEMPLATE, base], {
      cwd: dir,
      env,
    }).split(';')[0];
    const cpu = new Map<number, number>();
    for (;;) {
      sampleCpu(cpu);
      const line = sh('scontrol', ['show', 'job', '-o', id]);
      const state = /JobState=(\S+)/.exec(line)?.[1];
      if (state === 'COMPLETED') break;
      if (state && !['PENDING', 'RUNNING', 'CONFIGURING', 'COMPLETING'].includes(state)) {
        throw new Error(`job ${id} (${k} nodes) ended ${state}:\n${readFileSync(path.join(dir, `raas-${id}.out`), 'utf8').slice(-3000)}`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    const jobS = (performance.now() - t0) / 1000;
    const runDir = path.join(dir, 'runs', `slurm-${id}`);
    const batches = readFileSync(path.join(runDir, 'batches.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(
        (l) =>
          JSON.parse(l) as { step: number; groups: unknown[]; stats: { wall_s: number; completed: number; worker_utilization: number } },
      )
      .filter((b) => b.step >= 1);
    const wall = batches.reduce((a, b) => a + b.stats.wall_s, 0);
    return {
      nodes: k,
      rep,
      batch_size: GROUPS_PER_NODE * k,
      informative_groups_per_s: batches.reduce((a, b) => a + b.groups.length, 0) / wall,
      rollouts_per_s: (batches.reduce((a, b) => a + b.stats.completed, 0) * N) / wall,
      worker_utilization: batches.reduce((a, b) => a + b.stats.worker_utilization * b.stats.wall_s, 0) / wall,
      measured_s: wall,
      job_s: jobS,
      infra_cpu_s: [...cpu.values()].reduce((a, b) => a + b, 0),
      load_before: loadBefore,
      load_after: loadavg()[0],
      steps: batches.map((b) => ({ wall_s: b.stats.wall_s, worker_utilization: b.stats.worker_utilization })),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Records utime + stime (s) of every raas serve / sim-llm process bound to a node address (127.0.71.x). */
function sampleCpu(into: Map<number, number>): void {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (!/(serve|sim-llm)\x00--host\x00127\.0\.71\./.test(cmd)) continue;
      const f = readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ');
      into.set(Number(d), (Number(f[11]) + Number(f[12])) / 100);
    } catch {
      // gone meanwhile
    }
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Runs the Slurm scaling benchmark (brings the local cluster up with 8 nodes unless it is up). */
export async function main(args: string[]): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('bench:scale --slurm starts a local Slurm cluster and needs root');
  const quick = args.includes('--quick');
  const flag = (name: string, dflt: number): number => {
    const i = args.indexOf(name);
    const v = i >= 0 ? Number(args[i + 1]) : dflt;
    if (!Number.isInteger(v) || v < 1) throw new Error(`${name}: expected a positive integer`);
    return v;
  };
  const reps = flag('--reps', quick ? 1 : 2);
  const steps = flag('--steps', quick ? 3 : 6);
  // --nodes K: one size only (diagnostics; efficiencies then need the 1-node point).
  const ks = args.includes('--nodes') ? [flag('--nodes', 1)] : quick ? [1, 2] : [1, 2, 4, 8];
  const dir = process.env.RAAS_SLURM_DIR ?? '/run/raas-slurm';
  const wasUp = existsSync(path.join(dir, 'slurmctld.pid'));
  if (!wasUp) sh('bash', [CLUSTER, 'up', String(Math.max(...ks))]);
  process.env.SLURM_CONF = path.join(dir, 'slurm.conf');
  const have = new Set(sh('sinfo', ['-h', '-N', '-o', '%N']).split('\n').filter(Boolean)).size;
  if (have < Math.max(...ks))
    throw new Error(
      `the local cluster in ${dir} has ${have} nodes; take it down (scripts/slurm-cluster.sh down) or bring it up with ${Math.max(...ks)}`,
    );
  process.stderr.write(
    `bench:scale --slurm: nodes ${ks.join(', ')}; ${RUN_WORKERS} RUN workers per node; n=${N}; batch_size ${GROUPS_PER_NODE}×nodes; 1 warm-up + ${steps} measured steps; ${reps} repetition(s); decode ${LATENCY.decode_ms_per_token} ms/token; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  const pts: Point[] = [];
  try {
    for (let rep = 0; rep < reps; rep++) {
      // Rotated order, so a trend in the machine's load does not favour one size.
      const order = rep % 2 === 0 ? ks : [...ks].reverse();
      for (const k of order) {
        const p = await measure(k, rep, steps);
        pts.push(p);
        process.stderr.write(
          `  ${k} node(s), rep ${rep}: ${p.informative_groups_per_s.toFixed(3)} groups/s, ${p.rollouts_per_s.toFixed(2)} rollouts/s, util ${(p.worker_utilization * 100).toFixed(0)}%, measured ${p.measured_s.toFixed(1)} s of a ${p.job_s.toFixed(0)} s job, infra CPU ${p.infra_cpu_s.toFixed(0)} s, load ${p.load_before.toFixed(2)} → ${p.load_after.toFixed(2)}; steps ${p.steps.map((x) => `${x.wall_s.toFixed(1)}s/${(x.worker_utilization * 100).toFixed(0)}%`).join(' ')}\n`,
        );
      }
    }
  } finally {
    if (!wasUp) sh('bash', [CLUSTER, 'down']);
  }
  const base = median(pts.filter((p) => p.nodes === 1).map((p) => p.informative_groups_per_s));
  const baseR = median(pts.filter((p) => p.nodes === 1).map((p) => p.rollouts_per_s));
  const rows = ks.map((k) => {
    const at = pts.filter((p) => p.nodes === k);
    const g = at.map((p) => p.informative_groups_per_s);
    const eff = at.map((p) => p.informative_groups_per_s / (k * base));
    const reff = at.map((p) => p.rollouts_per_s / (k * baseR));
    const util = at.map((p) => p.worker_utilization);
    return {
      nodes: k,
      batch_size: GROUPS_PER_NODE * k,
      informative_groups_per_s: median(g),
      range: [Math.min(...g), Math.max(...g)],
      scaling_efficiency: median(eff),
      efficiency_range: [Math.min(...eff), Math.max(...eff)],
      rollouts_per_s: median(at.map((p) => p.rollouts_per_s)),
      rollout_scaling_efficiency: median(reff),
      worker_utilization: median(util),
      utilization_range: [Math.min(...util), Math.max(...util)],
    };
  });
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(
    path.join(here, 'results', 'scale-slurm.json'),
    JSON.stringify(
      {
        bench: 'scale-slurm',
        date: new Date().toISOString(),
        steps,
        reps,
        n: N,
        run_workers_per_node: RUN_WORKERS,
        groups_per_node: GROUPS_PER_NODE,
        latency: LATENCY,
        filler: FILLER,
        rows,
        points: pts,
      },
      null,
      2,
    ) + '\n',
  );
  const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;
  process.stdout.write(
    '\n| nodes | batch_size | informative groups/s (min–max) | scaling efficiency (min–max) | rollouts/s | rollout scaling efficiency | worker util (min–max) |\n|---|---|---|---|---|---|---|\n',
  );
  for (const r of rows) {
    process.stdout.write(
      `| ${r.nodes} | ${r.batch_size} | ${r.informative_groups_per_s.toFixed(3)} (${r.range.map((x) => x.toFixed(3)).join('–')}) | ${pct(r.scaling_efficiency)} (${r.efficiency_range.map(pct).join('–')}) | ${r.rollouts_per_s.toFixed(2)} | ${pct(r.rollout_scaling_efficiency)} | ${pct(r.worker_utilization)} (${r.utilization_range.map(pct).join('–')}) |\n`,
    );
  }
}
