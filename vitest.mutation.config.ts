import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// The fast unit tests Stryker runs against each mutant of one target (`npm run test:mutation`,
// test/mutation/run.ts): RAAS_MUTATION_TARGET names the target in test/mutation/targets.json.
// No global setup (nothing here needs dist/) and no sandbox tests.
const targets = JSON.parse(readFileSync(new URL('./test/mutation/targets.json', import.meta.url), 'utf8')) as Record<string, { tests: string[] }>;
const target = process.env.RAAS_MUTATION_TARGET;
const include = target ? targets[target]?.tests : Object.values(targets).flatMap((t) => t.tests);
if (!include) throw new Error(`RAAS_MUTATION_TARGET=${target}: not a target of test/mutation/targets.json (${Object.keys(targets).join(', ')})`);

export default defineConfig({
  test: {
    include,
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
