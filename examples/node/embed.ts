/**
 * Embedding the DAPO coordinator in a Node trainer: three steps against a local rollout server and
 * simulated backends that the coordinator starts itself (`embedded: true`).
 *
 *   npx tsx examples/node/embed.ts
 *
 * In a real trainer, replace `train(batch)` with your optimizer step and pass the backends you
 * synced the new weights into (or nothing: the configured ones are re-registered).
 */
import { Coordinator } from '../../src/dapo/index.js';
import type { Batch } from '../../src/protocol/batch.js';

const here = new URL('.', import.meta.url).pathname;

/** Stand-in for an optimizer step: reads what a trainer reads from the batch. */
function train(batch: Batch): { tokens: number; meanAbsAdvantage: number } {
  let tokens = 0;
  let adv = 0;
  let count = 0;
  for (const g of batch.groups) {
    for (const r of g.rollouts) {
      // r.tokens.prompt_ids ++ r.tokens.response_ids is the sequence; response_mask marks model tokens;
      // r.tokens.logprobs are the backend's (for off-policy correction with r.staleness).
      tokens += r.tokens.response_mask.reduce((a, m) => a + m, 0);
      adv += Math.abs(r.advantage); // a real step would weight each token's loss by it
      count++;
    }
  }
  return { tokens, meanAbsAdvantage: adv / Math.max(1, count) };
}

async function main(): Promise<void> {
  const coordinator = new Coordinator({
    name: 'embed-example',
    seed: 1,
    embedded: { backends: 2, sim: { latency: { decode_ms_per_token: 0.5 } } },
    dataset: { path: `${here}../../configs/data/math.jsonl` },
    n: 4,
    batch_size: 2,
    steps: 3,
  });
  try {
    for await (const batch of coordinator.batches()) {
      const r = train(batch);
      const s = batch.stats;
      console.log(
        `step ${batch.step} (policy v${batch.policy_version}): ${batch.groups.length} groups, ${r.tokens} model tokens, ` +
          `filtered ${s.filtered}, carried over ${s.carried_over}, mean |advantage| ${r.meanAbsAdvantage.toFixed(3)}`,
      );
      const { policy_version } = await coordinator.updateWeights({});
      console.log(`  weights updated: policy v${policy_version}`);
    }
    const state = coordinator.checkpoint(); // JSON: save it to resume with Coordinator.resume(config, state)
    console.log(`checkpoint: ${state.groups.length} groups buffered or in flight`);
  } finally {
    await coordinator.close(); // cancels in-flight jobs, stops the embedded server and simulators
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
