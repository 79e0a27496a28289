import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// examples/python/learn.py (a numpy policy trained with GRPO through `raas sidecar`) with and
// without pre-rollout selection: selection must not cost learning. The target is the trained
// table's own expected reward (policy_reward, over every digit), not the reward of the rollouts
// raas ran: selection skips prompts that are already solved, so the rollouts' mean reward is lower
// with it by design (docs/training.md, "What selection changes").

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-learn-selection-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const TARGET = 0.7;

function numpyPython(): string {
  for (const py of ['/usr/bin/python3', 'python3']) {
    if (spawnSync(py, ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  throw new Error('no python3 with numpy: install python3-numpy (scripts/setup.sh does)');
}

interface Step {
  step: number;
  policy_reward: number;
  jobs_submitted: number;
  skipped: number;
}

function learn(args: string[]): Promise<{ code: number | null; out: string; steps: Step[] }> {
  const metrics = path.join(dir, `${args.join('_').replace(/\W+/g, '')}.jsonl`);
  return new Promise((resolve, reject) => {
    const child = spawn(numpyPython(), [path.join(root, 'examples/python/learn.py'), ...args, '--metrics', metrics], {
      cwd: root,
      env: { ...process.env, RAAS_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1' },
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

/**
 * Rollouts started until the trained policy reached the target (Infinity if never), interpolated
 * between the two steps around the crossing: a step holds some hundred rollouts, and which step
 * crosses first is the noise of asynchronous scheduling, not an effect of selection.
 */
function rolloutsToTarget(steps: Step[]): number {
  let sum = 0;
  let prev = { rollouts: 0, reward: 1 / 11 }; // the uniform table before step 0
  for (const s of steps) {
    sum += s.jobs_submitted;
    if (s.policy_reward >= TARGET)
      return prev.rollouts + ((sum - prev.rollouts) * (TARGET - prev.reward)) / (s.policy_reward - prev.reward);
    prev = { rollouts: sum, reward: s.policy_reward };
  }
  return Infinity;
}

// Asynchronous scheduling decides which rollouts land in which step, so one seed's count moves by
// up to a quarter from run to run (more under load): measured on one quiet run, none vs history
// 1027/1013, 1060/879, 1594/1500, 1248/1549 (totals 4929/4941). On this uniform task selection is
// neutral; the claim made is that it does not cost learning, summed over four seeds within 10 %.
// Its saving on skewed difficulty is measured by bench:select, not asserted here.
const SEEDS = [
  [0, 'drain'],
  [1, 'none'],
  [2, 'drain'],
  [3, 'none'],
] as const;
const TOLERANCE = 1.1;

describe('examples/python/learn.py with selection: selection does not cost learning', () => {
  it(`over ${SEEDS.length} seeds: policy reward ≥ ${TARGET} with selection history in ≤ ${TOLERANCE}× the rollouts of selection none`, async () => {
    const rows: { seed: number; none: number; history: number; skipped: number }[] = [];
    for (const [seed, colocate] of SEEDS) {
      // 20 prompts (2 per digit): each comes back every few steps, so selection has a history to act on.
      const common = ['--steps', '12', '--seed', String(seed), '--colocate', colocate, '--prompts', '20'];
      const none = await learn([...common, '--selection', 'none']);
      const hist = await learn([...common, '--selection', 'history']);
      for (const r of [none, hist]) {
        if (r.code !== 0 || r.steps.length !== 12) console.error(r.out);
        expect(r.code).toBe(0);
        expect(r.steps).toHaveLength(12);
      }
      // selection was on: it skipped prompts whose groups were all equal; off, it skipped none
      const skipped = hist.steps.reduce((x, s) => x + s.skipped, 0);
      expect(skipped).toBeGreaterThan(0);
      expect(none.steps.every((s) => s.skipped === 0)).toBe(true);
      rows.push({ seed, none: rolloutsToTarget(none.steps), history: rolloutsToTarget(hist.steps), skipped });
    }
    const total = (k: 'none' | 'history') => rows.reduce((x, r) => x + r[k], 0);
    for (const r of rows)
      console.log(
        `seed ${r.seed}: rollouts to policy reward ${TARGET}: none ${r.none.toFixed(0)}, history ${r.history.toFixed(0)}; skipped ${r.skipped}`,
      );
    console.log(`total: none ${total('none').toFixed(0)}, history ${total('history').toFixed(0)}`);
    for (const r of rows) {
      expect(r.none).toBeLessThan(Infinity);
      expect(r.history).toBeLessThan(Infinity);
    }
    expect(total('history')).toBeLessThanOrEqual(total('none') * TOLERANCE);
  }, 600_000);
});
