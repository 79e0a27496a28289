// Helpers for the Slurm tests: submit the project's real template with sbatch, wait for the job,
// read the run's own records (placement.json, the rollout servers' journals, batches), and find the
// raas processes the job's steps started. SLURM_CONF (from scripts/slurm-cluster.sh) selects the
// local cluster.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { processTable } from '../helpers/procs.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const TEMPLATE = path.join(ROOT, 'configs/slurm/raas.sbatch');
/** The template that adds a job's nodes to a running training's registry. */
export const JOIN_TEMPLATE = path.join(ROOT, 'configs/slurm/raas-join.sbatch');

const run = (cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string =>
  execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts }).trim();

/** The idle nodes of the cluster, in name order, with the address each name resolves to. */
export function clusterNodes(): Array<{ node: string; address: string }> {
  const names = run('sinfo', ['-h', '-N', '-o', '%N']).split('\n').filter(Boolean);
  return [...new Set(names)]
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
    .map((node) => ({
      node,
      address: run('getent', ['hosts', node]).split(/\s+/)[0],
    }));
}

/** `sbatch --parsable` of the template from `cwd`, the job's environment extended by `env`; the job id. */
export function submit(
  cwd: string,
  env: Record<string, string>,
  sbatchArgs: string[],
  templateArgs: string[] = [],
  template = TEMPLATE,
): string {
  const out = run('sbatch', ['--parsable', ...sbatchArgs, template, ...templateArgs], { cwd, env: { ...process.env, ...env } });
  return out.split(';')[0];
}

/** `scancel --batch --signal=TERM`: only the batch script gets TERM (raas-join.sbatch drains then). */
export function signalBatch(id: string): void {
  run('scancel', ['--batch', '--signal=TERM', id]);
}

/** A job's state and exit code as `scontrol show job` reports them (terminal jobs stay there for MinJobAge, 300 s). */
export function jobState(id: string): { state: string; exit: string } {
  let line: string;
  try {
    line = run('scontrol', ['show', 'job', '-o', id]);
  } catch (err) {
    // Past MinJobAge a finished job is forgotten: it is over, whatever it was.
    if (/Invalid job id/.test(String((err as { stderr?: string }).stderr ?? err))) return { state: 'PURGED', exit: '?' };
    throw err;
  }
  return { state: /JobState=(\S+)/.exec(line)?.[1] ?? 'UNKNOWN', exit: /\bExitCode=(\S+)/.exec(line)?.[1] ?? '?' };
}

const TERMINAL = new Set([
  'PURGED',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
  'TIMEOUT',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'BOOT_FAIL',
  'DEADLINE',
  'PREEMPTED',
]);

/** Polls until the job ends; past `timeoutS` the job is cancelled and the call throws. */
export async function waitJob(id: string, timeoutS: number): Promise<{ state: string; exit: string }> {
  const end = Date.now() + timeoutS * 1000;
  for (;;) {
    const s = jobState(id);
    if (TERMINAL.has(s.state)) return s;
    if (Date.now() > end) {
      cancel(id);
      throw new Error(`job ${id} still ${s.state} after ${timeoutS} s; cancelled`);
    }
    await sleep(1000);
  }
}

/** Polls until `file` exists (or the job ended, or the time is up). */
export async function waitFile(file: string, jobId: string, timeoutS: number): Promise<void> {
  const end = Date.now() + timeoutS * 1000;
  while (!existsSync(file)) {
    const s = jobState(jobId).state;
    if (TERMINAL.has(s)) throw new Error(`job ${jobId} ended (${s}) before ${file} appeared`);
    if (Date.now() > end) throw new Error(`${file} did not appear within ${timeoutS} s`);
    await sleep(250);
  }
}

/** `scontrol update nodename=<node> state=<state> [reason=...]` (down, drain, resume). */
export function setNodeState(node: string, state: 'down' | 'drain' | 'resume'): void {
  run('scontrol', ['update', `nodename=${node}`, `state=${state}`, ...(state === 'resume' ? [] : ['reason=raas-test'])]);
}

/** A node's state as sinfo reports it (idle, mixed, allocated, down, drained, draining…). */
export function nodeState(node: string): string {
  return run('sinfo', ['-h', '-n', node, '-o', '%T']).split('\n')[0] ?? '';
}

export function cancel(id: string): void {
  try {
    run('scancel', [id]);
  } catch {
    // already gone
  }
}

/** Job ids still in squeue. */
export function queued(): string[] {
  return run('squeue', ['-h', '-o', '%i']).split('\n').filter(Boolean);
}

/** Processes whose command line contains every one of `parts` (from /proc). */
export function processes(...parts: string[]): Array<{ pid: number; cmd: string }> {
  return processTable()
    .filter((p) => p.pid !== process.pid && p.cmd && parts.every((x) => p.cmd.includes(x)))
    .map(({ pid, cmd }) => ({ pid, cmd }));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** JSON lines of a file (empty when it does not exist). */
export function jsonLines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as T);
}

/** One line of a rollout server's results journal (the fields the tests read). */
export interface JournalLine {
  job_id: string;
  state: string;
  ended_at: number;
  result: { backend: string | null };
}

/** placement.json as the template writes it. */
export interface PlacementRecord {
  job_id: string;
  nodes: Array<{
    node: string;
    address: string;
    rollout_server: string;
    reachable: boolean;
    backends: Array<{ address: string; node: string | null; weight_version: string; assigned: number }>;
  }>;
}

/** The host part of a URL. */
export const hostOf = (url: string): string => new URL(url).hostname;
