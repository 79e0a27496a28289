import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { withEnv } from '../helpers/procs.js';

// examples/python/learn.py as a user runs it: a numpy softmax policy behind its own vLLM-protocol
// server, `raas serve` with the digits task, `raas sidecar` through RaasSidecar, GRPO with truncated
// importance weights on to_verl's arrays. No simulator is involved: the reward rises only because
// the trainer changes the policy's token distribution.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-learn-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A python3 with numpy (Debian's python3-numpy, installed by scripts/setup.sh). */
function numpyPython(): string {
  for (const py of ['/usr/bin/python3', 'python3']) {
    if (spawnSync(py, ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  throw new Error('no python3 with numpy: install python3-numpy (scripts/setup.sh does)');
}

interface Step {
  step: number;
  mean_reward: number;
  policy_reward: number;
  stale_rows: number;
  stale_max_abs_is_dev: number | null;
  fresh_max_abs_is_dev: number;
  rollouts: number;
}

/** Marks every process one learn.py run starts (its environment reaches the servers it spawns):
 * learn-selection.test.ts runs the same example in parallel, so a command-line match is not ours. */
const RUN_MARK = 'RAAS_LEARN_TEST_RUN';

function learn(args: string[], mark: string): Promise<{ code: number | null; out: string; steps: Step[] }> {
  const metrics = path.join(dir, `${args.join('_').replace(/\W+/g, '')}.jsonl`);
  return new Promise((resolve, reject) => {
    const child = spawn(numpyPython(), [path.join(root, 'examples/python/learn.py'), ...args, '--metrics', metrics], {
      cwd: root,
      env: { ...process.env, RAAS_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1', [RUN_MARK]: mark },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => {
      let steps: Step[] = [];
      try {
        steps = readFileSync(metrics, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Step);
      } catch {
        // no metrics: the assertions below print the output
      }
      resolve({ code, out, steps });
    });
  });
}

/** Processes one run of the example started; none may outlive it. */
function leftovers(mark: string): string[] {
  return withEnv(RUN_MARK, mark).map((p) => p.cmd);
}

describe('examples/python/learn.py: the reward rises by learning (12 steps of 8 groups x 8 rollouts)', () => {
  // Two fixed seeds, once as a co-located trainer (the step runs inside pause_generation /
  // resume_generation) and once with generation going on while it trains.
  for (const [seed, colocate] of [
    [0, 'drain'],
    [1, 'none'],
  ] as const) {
    it(`seed ${seed}, colocate ${colocate}: mean reward ≤ 0.3 at step 0 and ≥ 0.7 over the last two of 12 steps`, async () => {
      const mark = randomUUID();
      const r = await learn(['--steps', '12', '--seed', String(seed), '--colocate', colocate], mark);
      if (r.code !== 0 || r.steps.length !== 12) console.error(r.out);
      expect(r.code).toBe(0);
      expect(r.steps.map((s) => s.step)).toEqual([...Array(12).keys()]);
      const curve = r.steps.map((s) => s.mean_reward);
      // The reward of every rollout raas completed in the step (filtered groups included).
      expect(curve[0]).toBeLessThanOrEqual(0.3);
      expect((curve[10]! + curve[11]!) / 2).toBeGreaterThanOrEqual(0.7);
      // The trained table itself: P(first token = asked digit), averaged over the ten digits.
      expect(r.steps[11]!.policy_reward).toBeGreaterThanOrEqual(0.7);
      // raas's logprobs are the policy's own: on rows sampled by the current table the importance
      // weight is 1 up to float32 rounding.
      for (const s of r.steps) expect(s.fresh_max_abs_is_dev).toBeLessThan(1e-5);
      // Staleness is real and corrected: some rows were sampled by the previous table, and their
      // importance weights are not 1.
      const stale = r.steps.filter((s) => s.stale_rows > 0);
      expect(stale.length).toBeGreaterThan(0);
      expect(Math.max(...stale.map((s) => s.stale_max_abs_is_dev!))).toBeGreaterThan(1e-3);
      expect(leftovers(mark)).toEqual([]);
    }, 150_000);
  }
});
