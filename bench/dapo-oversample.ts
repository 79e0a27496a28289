/**
 * The oversampling sync baseline of bench:dapo: veRL's DAPO recipe, driven through the same raas
 * rollout server. Each generation round submits `gen_batch_size` prompts (n rollouts each) and waits
 * for all of them; zero-variance groups are filtered; rounds repeat until `batch_size` groups are
 * kept, and the kept groups beyond `batch_size` are thrown away. Nothing runs while the trainer trains.
 *
 * veRL at 9d7720026a1edf52e6dfd88170c79339e8b27ef7 (the last commit with the recipe in-tree):
 * - verl/trainer/ppo/ray_trainer.py:384 — the train dataloader's batch size is
 *   `data.gen_batch_size` (default train_batch_size): one dataloader batch is one generation round;
 * - recipe/dapo/dapo_ray_trainer.py:148-160 — each round generates the whole batch
 *   (`generate_sequences`, n rollouts per prompt) before anything else happens;
 * - recipe/dapo/dapo_ray_trainer.py:255-260 — keeps the prompts whose metric's std > 0;
 * - recipe/dapo/dapo_ray_trainer.py:270-278 — fewer than train_batch_size kept: generate another round;
 * - recipe/dapo/dapo_ray_trainer.py:287-288 — enough: `batch[:train_batch_size * n]`, the rest is dropped;
 * - recipe/dapo/run_dapo_qwen2.5_32b.sh:28-29 — the recipe's gen_prompt_bsz = 3 × train_prompt_bsz.
 */
import { RolloutFleet } from '../src/client/fleet.js';
import { registerBackends } from '../src/dapo/backends.js';
import { parseTrainConfig } from '../src/dapo/config.js';
import { loadDataset } from '../src/dapo/dataset.js';
import { type GroupRecord, groupId, groupRequests, judgeGroup, resultTokens } from '../src/dapo/group.js';
import type { BackendRef } from '../src/protocol/config-train.js';
import type { Result } from '../src/protocol/process.js';
import type { Recorder } from './dapo-record.js';

export interface OversampleOptions {
  name: string;
  seed: number;
  server: string;
  backends: BackendRef[];
  dataset: string;
  n: number;
  batch_size: number;
  /** Prompts per generation round (veRL's data.gen_batch_size). */
  gen_batch_size: number;
  steps: number;
  train_ms: number;
  sampling_params: Record<string, unknown>;
  /** RUN workers of the server: the denominator of the driver-side utilization. */
  workers: number;
  recorder: Recorder;
}

export interface OversampleRun {
  wall_s: number;
  rounds: number;
  groups: number;
  filtered: number;
  tokens_generated: number;
  /** Kept groups beyond batch_size (thrown away) and groups with a failed rollout. */
  tokens_wasted: number;
  /** Jobs submitted and not ended, capped at the worker count, time-averaged ÷ workers. */
  driver_utilization: number;
}

export async function runOversampled(o: OversampleOptions): Promise<OversampleRun> {
  const cfg = parseTrainConfig(
    {
      name: o.name,
      seed: o.seed,
      servers: [{ url: o.server }],
      backends: o.backends,
      dataset: { path: o.dataset },
      n: o.n,
      batch_size: o.batch_size,
      steps: o.steps,
      mode: 'sync',
      sampling_params: o.sampling_params,
    },
    'oversample',
  );
  const dataset = await loadDataset(cfg.dataset, cfg.seed);
  const fleet = new RolloutFleet({ servers: cfg.servers });
  const out: OversampleRun = { wall_s: 0, rounds: 0, groups: 0, filtered: 0, tokens_generated: 0, tokens_wasted: 0, driver_utilization: 0 };
  let inflight = 0;
  let occupied = 0;
  let lastT = performance.now();
  const tick = (): void => {
    const t = performance.now();
    occupied += Math.min(inflight, o.workers) * (t - lastT);
    lastT = t;
  };
  let index = 0;
  try {
    await registerBackends(fleet.clients(), cfg.backends, '0');
    const t0 = performance.now();
    lastT = t0;
    for (let step = 0, version = 0; step < o.steps; step++) {
      const kept: GroupRecord[] = [];
      while (kept.length < o.batch_size) {
        out.rounds++;
        const groups: GroupRecord[] = [];
        for (let i = 0; i < o.gen_batch_size; i++) {
          const prompt = dataset.next();
          if (!prompt) throw new Error('oversample: dataset exhausted');
          const gi = index++;
          groups.push({
            index: gi,
            id: groupId(cfg.name, gi),
            prompt,
            requests: groupRequests(cfg, prompt, gi, version),
            submittedVersion: version,
            submittedStep: step,
            state: 'running',
            results: new Array(o.n).fill(undefined),
            ended: 0,
            tokens: 0,
          });
        }
        tick();
        inflight += o.gen_batch_size * o.n;
        for (const g of groups) for (const q of g.requests) o.recorder.submitted(q.job_id!);
        await Promise.all(
          groups.map((g) =>
            Promise.all(
              fleet.submitGroup(g.requests).map((p, k) =>
                p
                  .then(
                    (r: Result) => {
                      o.recorder.add(g.requests[k]!.job_id!, r);
                      g.results[k] = r;
                    },
                    () => undefined,
                  )
                  .finally(() => {
                    tick();
                    inflight--;
                    g.ended++;
                  }),
              ),
            ),
          ),
        );
        for (const g of groups) {
          out.groups++;
          const done = g.results.filter((r): r is Result => r !== undefined);
          g.tokens = done.reduce((a, r) => a + resultTokens(r), 0);
          out.tokens_generated += g.tokens;
          if (done.length < o.n) {
            out.tokens_wasted += g.tokens;
            continue;
          }
          const verdict = judgeGroup(g, cfg);
          if (verdict === 'accepted') kept.push(g);
          else if (verdict === 'filtered') out.filtered++;
          else out.tokens_wasted += g.tokens;
        }
      }
      for (const g of kept.slice(o.batch_size)) out.tokens_wasted += g.tokens;
      await new Promise((r) => setTimeout(r, o.train_ms)); // the trainer's step
      version++;
      await registerBackends(fleet.clients(), cfg.backends, String(version));
    }
    tick();
    out.wall_s = (performance.now() - t0) / 1000;
    out.driver_utilization = occupied / (out.wall_s * 1000 * o.workers);
    return out;
  } finally {
    await fleet.close();
  }
}
