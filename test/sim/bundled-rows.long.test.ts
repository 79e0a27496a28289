import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runEval } from '../../src/dapo/eval.js';
import { descendantsOf, waitGone } from '../helpers/procs.js';
import { DATA, ROOT, readJsonl } from '../handlers/helpers.js';

// Every row of configs/data/*.jsonl is solvable by the simulator from where a user would start it:
// `raas sim-llm` by hand (every bundled file loaded, so a row and its veRL copy meet) behind
// `raas serve`, and `embedded: true` (the simulators load the run's dataset only). The simulator
// plays every instance right (`--pass-rate 1`, `difficulty: {model: fixed, pass_rate: 1}`), and
// each row's rollout, graded by the real handlers in bwrap sandboxes, must earn reward 1.
const FILES = readdirSync(DATA)
  .filter((f) => f.endsWith('.jsonl'))
  .sort();
const CLI = path.join(ROOT, 'dist/src/cli.js');
const base = process.getuid?.() === 0 ? '/var/tmp' : realpathSync(process.env.TMPDIR ?? '/tmp');
const sandboxRoot = mkdtempSync(path.join(base, 'raas-t-rows-'));
// mkdtemp makes it 0700: the sandbox user must reach the tool server and workspaces under it.
chmodSync(sandboxRoot, 0o755);
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await waitGone(() => children.flatMap((c) => (c.pid ? descendantsOf(c.pid) : [])), 15_000);
  rmSync(sandboxRoot, { recursive: true, force: true });
});

/** Starts `raas <args>` and resolves with the URL its first stdout line announces. */
function start(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.stderr!.on('data', (d: Buffer) => (err += d));
    child.once('exit', (code) => reject(new Error(`raas ${args[0]} exited with ${code}: ${err}`)));
  });
}

/**
 * A row as sent: code rows get a generous time limit (a reference solution within 5 s of CPU can
 * take longer on a CI machine shared with other jobs; the point here is the plan, not the speed).
 */
const slowMachine = (row: Record<string, unknown>): Record<string, unknown> =>
  Array.isArray(row.tests) || String(row.data_source).startsWith('deepcoder') ? { ...row, time_limit_s: 60 } : row;

/** Runs `jobs` with at most `limit` at once. */
async function pool<T>(items: T[], limit: number, job: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await job(items[next++]!);
    }),
  );
}

describe('every bundled row earns reward 1 when the simulated policy plays it right', () => {
  it('standalone: raas sim-llm --pass-rate 1 (every bundled file) behind raas serve, one /process per row', async () => {
    const sim = await start(['sim-llm', '--port', '0', '--seed', '5', '--pass-rate', '1']);
    const srv = await start(['serve', '--port', '0', '--llm', sim, '--set', `sandbox.root=${sandboxRoot}/serve`]);
    const rows = FILES.flatMap((f) => readJsonl(f).map((row, i) => ({ where: `${f} line ${i + 1}`, row })));
    const failed: string[] = [];
    await pool(rows, 6, async ({ where, row }) => {
      const res = await fetch(`${srv}/process`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ instance: slowMachine(row), sampling_params: { seed: 1, max_iterations: 12 } }),
      });
      const r = (await res.json()) as { reward?: number; critical_error?: string | null; error?: unknown; details?: unknown };
      if (res.status !== 200 || r.reward !== 1)
        failed.push(
          `${where}: status ${res.status}, reward ${r.reward}, critical_error ${r.critical_error}, ${JSON.stringify(r.error ?? r.details).slice(0, 300)}`,
        );
    });
    expect(failed, failed.join('\n')).toEqual([]);
    expect(rows.length).toBeGreaterThanOrEqual(100);
  }, 1_200_000);

  for (const file of FILES) {
    it(`embedded: raas eval of ${file} (the simulators load that file only)`, async () => {
      const copy = path.join(sandboxRoot, `rows-${file}`);
      writeFileSync(
        copy,
        readJsonl(file)
          .map((r) => `${JSON.stringify(slowMachine(r))}\n`)
          .join(''),
      );
      const report = await runEval({
        name: `rows-${file.replace(/\W/g, '-')}`,
        embedded: {
          servers: 1,
          backends: 1,
          sim: { difficulty: { model: 'fixed', pass_rate: 1 } },
          server: { sandbox: { root: path.join(sandboxRoot, file) }, log_level: 'silent' },
        },
        dataset: { path: copy },
        n: 1,
        sampling_params: { max_iterations: 12 },
      });
      expect(report.overall.prompts).toBe(readJsonl(file).length);
      expect(report.overall, JSON.stringify(report.data_sources)).toMatchObject({ pass_at_1: 1, errors: 0 });
    }, 600_000);
  }
});
