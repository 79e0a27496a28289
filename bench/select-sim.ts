/**
 * A child process hosting the simulated backends of `bench:select` (as bench/sim-fleet.ts does for
 * bench:dapo): their latency model runs on its own event loop, so the rollout server's CPU work does
 * not slow simulated GPU time. Every backend has the same seed, so an instance's pass rate does not
 * depend on the backend. Usage: `tsx bench/select-sim.ts '<json: {count, median_tokens, options}>'`;
 * prints `{"urls": [...]}` and closes everything when stdin ends.
 */
import { startSim, type SimHandle, type SimOptions } from '../src/sim/index.js';
import { pickPolicy } from './select-task.js';

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as { count?: number; median_tokens?: number; options?: SimOptions };
  const sims: SimHandle[] = [];
  for (let i = 0; i < (spec.count ?? 2); i++) sims.push(await startSim(spec.options ?? {}, { policies: [pickPolicy(spec.median_tokens)] }));
  process.stdout.write(`${JSON.stringify({ urls: sims.map((s) => s.url) })}\n`);
  const stop = (): void => {
    void Promise.all(sims.map((s) => s.close())).then(() => process.exit(0));
  };
  process.stdin.on('end', stop);
  process.stdin.resume();
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`select-sim: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
