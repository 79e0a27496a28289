/**
 * The pipeline's own CPU per no-op job, without HTTP: `pipeline.submit` → the result's JSON, with
 * the server's observers (metrics, console feed) attached, C jobs in flight. Prints the CPU µs per
 * job of each round and the minimum (the least disturbed by other load on the machine). Steadier
 * than bench:server for comparing two builds of the pipeline:
 *
 *   DIST=$PWD/dist C=64 N=20000 R=7 npx tsx bench/pipeline-alone.ts
 */
import { z } from 'zod';
import type { AgentHandler } from '../src/server/handlers/types.js';

const N = Number(process.env.N ?? 20000);
const C = Number(process.env.C ?? 64);
const ROUNDS = Number(process.env.R ?? 7);

const noop: AgentHandler<Record<string, unknown>> = {
  name: 'noop',
  instance: z.looseObject({}),
  init: async () => ({}),
  run: async () => ({
    messages: [],
    tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
    finish_reason: 'finish',
    artifacts: {},
  }),
  eval: async () => ({ reward: 1, resolved: true }),
};

const mod = (await import(
  process.env.DIST ? `${process.env.DIST}/src/server/index.js` : '../src/server/index.js'
)) as typeof import('../src/server/index.js');
const registry = new mod.HandlerRegistry(mod.builtinHandlers());
registry.register(noop);
const raas = await mod.startRolloutServer(
  { port: 0, log_level: 'silent', workers: { init: 256, run: 256, eval: 256 }, llm: { backends: [{ address: 'http://127.0.0.1:9' }] } },
  { registry },
);
let seq = 0;
let bytes = 0;
const run = async (total: number): Promise<void> => {
  let started = 0;
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (started++ < total) {
        const i = seq++;
        const body = JSON.parse(
          JSON.stringify({
            instance: { data_source: 'noop', instance_id: `i${i}` },
            sampling_params: { temperature: 1, max_tokens_per_turn: 64 },
            job_id: `p-${i}`,
          }),
        ) as unknown;
        const sub = await raas.pipeline.submit(body);
        const json = await sub.finished;
        bytes += json.length;
      }
    }),
  );
};
await run(5000);
const out: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const c0 = process.cpuUsage();
  bytes = 0;
  await run(N);
  const c = process.cpuUsage(c0);
  out.push((c.user + c.system) / N);
}
await raas.close();
console.log(
  `pipeline alone, c=${C}: CPU µs per job ${out.map((x) => x.toFixed(1)).join(' ')}; min ${Math.min(...out).toFixed(1)}; result ${(bytes / N).toFixed(0)} bytes`,
);
