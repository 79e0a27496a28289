import { RolloutFleet } from '../client/fleet.js';
import type { TrainConfig, TrainConfigInput } from '../protocol/config-train.js';
import type { Result } from '../protocol/process.js';
import { systemClock, type Clock } from '../util/clock.js';
import { registerBackends } from './backends.js';
import { parseTrainConfig } from './config.js';
import { loadDataset, type Prompt } from './dataset.js';
import { startEnvironment } from './environment.js';
import { isErrorResult } from './group.js';
import { syntheticResult } from './synthetic.js';

/** Pass rates of one data source (or of everything). */
interface PassRates {
  prompts: number;
  rollouts: number;
  /** Mean over prompts of (successful rollouts / n): the unbiased pass@1. */
  pass_at_1: number;
  /** Fraction of prompts with at least one successful rollout among n. */
  pass_at_n: number;
  mean_reward: number;
  errors: number;
}

/** What `runEval` returns (and `raas eval` prints and writes). */
export interface EvalReport {
  name: string;
  n: number;
  dataset: string;
  wall_s: number;
  overall: PassRates;
  data_sources: Record<string, PassRates>;
}

/** Options of runEval. */
export interface EvalOptions {
  signal?: AbortSignal;
  clock?: Clock;
  /** Called after each prompt's n rollouts ended. */
  onProgress?: (done: number, total: number) => void;
  /** Job ids are `<name>-eval-<tag>-g<i>-r<k>` (default tag: "0"): change it to re-evaluate against the same servers. */
  tag?: string;
  /** weight_version the configured backends are registered with (default "eval"). */
  weight_version?: string;
}

/**
 * One pass over the eval dataset (`eval.dataset`, else `dataset`): n rollouts per prompt (`eval.n`,
 * else `n`), no filtering, no weight updates. A rollout succeeds when its reward is > 0.
 */
export async function runEval(config: TrainConfig | TrainConfigInput, opts: EvalOptions = {}): Promise<EvalReport> {
  const cfg = parseTrainConfig(config, 'runEval config');
  const clock = opts.clock ?? systemClock;
  const dsCfg = { ...(cfg.eval.dataset ?? cfg.dataset), shuffle: false, epochs: 1 };
  const n = cfg.eval.n ?? cfg.n;
  const dataset = await loadDataset(dsCfg, cfg.seed);
  const env = await startEnvironment({ ...cfg, dataset: dsCfg });
  const fleet = new RolloutFleet({ servers: env.servers, registry: env.registry, clock });
  const started = clock.now();
  try {
    await fleet.readCapacity();
    await registerBackends(fleet.clients(), env.backends, opts.weight_version ?? 'eval');
    // Servers a registry listed take groups once they hold the backends just placed.
    await fleet.refresh();
    const capacity = cfg.max_inflight_jobs ?? fleet.liveCapacity();
    const prompts: Prompt[] = [];
    for (let p = dataset.next(); p; p = dataset.next()) prompts.push(p);
    const perPrompt: Result[][] = new Array(prompts.length);
    let next = 0;
    let done = 0;
    const tag = opts.tag ?? '0';
    const worker = async (): Promise<void> => {
      while (next < prompts.length) {
        opts.signal?.throwIfAborted();
        const i = next++;
        const sampling = { ...cfg.sampling_params, seed: cfg.sampling_params.seed ?? cfg.seed };
        const reqs = Array.from({ length: n }, (_, k) => ({
          instance: { ...prompts[i], trajectory_id: k },
          sampling_params: sampling,
          job_id: `${cfg.name}-eval-${tag}-g${i}-r${k}`,
          group_id: `${cfg.name}-eval-${tag}-g${i}`,
          ...(cfg.timeout_s !== undefined ? { timeout_s: cfg.timeout_s } : {}),
        }));
        perPrompt[i] = await Promise.all(
          fleet.submitGroup(reqs, { signal: opts.signal }).map((p, k) => p.catch((err: unknown) => syntheticResult(reqs[k], err))),
        );
        opts.onProgress?.(++done, prompts.length);
      }
    };
    // Enough group workers to keep every run worker busy.
    await Promise.all(Array.from({ length: Math.max(1, Math.ceil(capacity / n)) }, worker));
    opts.signal?.throwIfAborted();
    const bySource = new Map<string, Result[][]>();
    prompts.forEach((p, i) => bySource.set(p.data_source, [...(bySource.get(p.data_source) ?? []), perPrompt[i]]));
    const data_sources: Record<string, PassRates> = {};
    for (const [ds, groups] of bySource) data_sources[ds] = passRates(groups);
    return { name: cfg.name, n, dataset: dsCfg.path, wall_s: (clock.now() - started) / 1000, overall: passRates(perPrompt), data_sources };
  } finally {
    await fleet.close();
    await env.close();
  }
}

/** pass@1 (mean success rate) and pass@n (any success) over groups of rollouts. */
function passRates(groups: Result[][]): PassRates {
  let p1 = 0,
    pn = 0,
    rewards = 0,
    rollouts = 0,
    errors = 0;
  for (const g of groups) {
    const ok = g.filter((r) => !isErrorResult(r) && r.reward > 0).length;
    p1 += g.length ? ok / g.length : 0;
    pn += ok > 0 ? 1 : 0;
    for (const r of g) {
      rewards += r.reward;
      rollouts++;
      if (isErrorResult(r)) errors++;
    }
  }
  const m = groups.length || 1;
  return { prompts: groups.length, rollouts, pass_at_1: p1 / m, pass_at_n: pn / m, mean_reward: rollouts ? rewards / rollouts : 0, errors };
}
