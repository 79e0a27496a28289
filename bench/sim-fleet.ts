/**
 * A child process hosting N simulated backends for a benchmark, so their latency model runs on its
 * own event loop: the rollout server's CPU work must not delay simulated GPU time, as it would not on
 * real hardware. Usage: `tsx bench/sim-fleet.ts '<json: {count, options}>'`; prints one JSON line
 * `{"urls": [...]}` on stdout, and closes everything when stdin ends.
 */
import { startSim, type SimHandle, type SimOptions } from '../src/sim/index.js';

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as { count?: number; options?: SimOptions };
  const sims: SimHandle[] = [];
  for (let i = 0; i < (spec.count ?? 4); i++) sims.push(await startSim({ ...spec.options, seed: (spec.options?.seed ?? 0) + i }));
  process.stdout.write(`${JSON.stringify({ urls: sims.map((s) => s.url) })}\n`);
  const stop = (): void => {
    void Promise.all(sims.map((s) => s.close())).then(() => process.exit(0));
  };
  process.stdin.on('end', stop);
  process.stdin.resume();
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`sim-fleet: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
