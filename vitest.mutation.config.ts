import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// The fast unit tests Stryker runs against each mutant of one target (`npm run test:mutation`,
// test/mutation/run.ts): RAAS_MUTATION_TARGET names the target in test/mutation/targets.json.
// No global setup (nothing here needs dist/) and no sandbox tests.
const targets = JSON.parse(readFileSync(new URL('./test/mutation/targets.json', import.meta.url), 'utf8')) as Record<string, { tests: string[]; baseline?: string[] }>;
const target = process.env.RAAS_MUTATION_TARGET;
// `npm run test:mutation -- --baseline`: only the tests written before mutation testing (the
// first-run figure in docs/reliability.md), without the ones written to kill surviving mutants.
const baseline = process.env.RAAS_MUTATION_BASELINE === '1';
const pick = (t: { tests: string[]; baseline?: string[] }) => (baseline ? t.baseline ?? t.tests : t.tests);
const include = target ? (targets[target] ? pick(targets[target]) : undefined) : Object.values(targets).flatMap(pick);
if (!include) throw new Error(`RAAS_MUTATION_TARGET=${target}: not a target of test/mutation/targets.json (${Object.keys(targets).join(', ')})`);

export default defineConfig({
  test: {
    include,
    exclude: baseline ? ['**/node_modules/**', 'test/dapo/*.mutation.test.ts', 'test/server/llm-*.test.ts', 'test/server/pipeline-*.test.ts'] : ['**/node_modules/**'],
    // A mutant that makes a test wait forever fails that test here (Killed) instead of reaching
    // Stryker's timeout, which restarts the whole test process: far cheaper. Instrumented code on a
    // shared 2-core machine runs several times slower than in `npm test`, hence 20 s.
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Stryker reruns a few test files per mutant, thousands of times: without isolation a worker
    // keeps its imported modules between runs (the mutant is switched at run time, not by
    // re-importing), which removes most of each run's cost. Every test here starts what it uses.
    isolate: false,
  },
});
