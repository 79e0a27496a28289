import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// The fast unit tests Stryker runs against each mutant of one target (`npm run test:mutation`,
// test/mutation/run.ts): RAAS_MUTATION_TARGET names the target in test/mutation/targets.json.
// No global setup (nothing here needs dist/) and no sandbox tests.
const targets = JSON.parse(readFileSync(new URL('./test/mutation/targets.json', import.meta.url), 'utf8')) as Record<string, { tests: string[] }>;
const target = process.env.RAAS_MUTATION_TARGET;
const include = target ? targets[target]?.tests : Object.values(targets).flatMap((t) => t.tests);
if (!include) throw new Error(`RAAS_MUTATION_TARGET=${target}: not a target of test/mutation/targets.json (${Object.keys(targets).join(', ')})`);

// `npm run test:mutation -- --baseline`: only the tests written before mutation testing (the
// first-run figure in docs/reliability.md), without the ones written to kill surviving mutants.
const baseline = process.env.RAAS_MUTATION_BASELINE === '1';

export default defineConfig({
  test: {
    include,
    exclude: baseline ? ['**/node_modules/**', 'test/dapo/*.mutation.test.ts', 'test/server/llm-*.test.ts', 'test/server/pipeline-*.test.ts'] : ['**/node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
