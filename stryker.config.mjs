// Mutation testing of one target of test/mutation/targets.json (RAAS_MUTATION_TARGET), run by
// `npm run test:mutation [-- <target>...]` (test/mutation/run.ts), never by `npm test`.
import { readFileSync } from 'node:fs';

const targets = JSON.parse(readFileSync(new URL('./test/mutation/targets.json', import.meta.url), 'utf8'));
const target = process.env.RAAS_MUTATION_TARGET;
if (!targets[target]) throw new Error(`RAAS_MUTATION_TARGET=${target}: not one of ${Object.keys(targets).join(', ')}`);
const out = process.env.RAAS_MUTATION_OUT ?? `reports/mutation/${target}`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  // RAAS_MUTATION_FILES (run.ts --files): some files of the target only.
  mutate: process.env.RAAS_MUTATION_FILES ? process.env.RAAS_MUTATION_FILES.split(',') : targets[target].mutate,
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  coverageAnalysis: 'perTest',
  // Stryker rewrites the tsconfig's extends/references through the TypeScript JS API, which
  // TypeScript 7 (the native compiler) no longer has; ours has neither, so point it at no file.
  tsconfigFile: 'tsconfig.none.json',
  // 2-core machines shared with other work.
  concurrency: Number(process.env.RAAS_MUTATION_CONCURRENCY ?? 2),
  incremental: true,
  incrementalFile: `${out}/incremental.json`,
  reporters: ['clear-text', 'progress', 'json', 'html'],
  jsonReporter: { fileName: `${out}/mutation.json` },
  htmlReporter: { fileName: `${out}/index.html` },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  tempDirName: '.stryker-tmp',
  // The sandbox copy needs the sources, the tests and their fixtures only (other work in the same
  // checkout makes and deletes files at the top level while a run copies it).
  ignorePatterns: ['/*', '!/src', '!/test', '!/configs', '!/package.json', '!/tsconfig.json', '!/vitest.mutation.config.ts', '!/stryker.config.mjs'],
  // Mutants reached only outside any test (module load, beforeAll hooks, timers firing between
  // tests) would each need a fresh vitest and every test of the target: left out of the score.
  ignoreStatic: true,
  // A mutant that hangs a test normally fails it at vitest's testTimeout (vitest.mutation.config.ts);
  // Stryker's own timeout (tests' time × 1.5 + 20 s, then a restart of the runner) is the backstop
  // for synchronous endless loops.
  timeoutMS: 20_000,
  timeoutFactor: 1.5,
  thresholds: { high: 80, low: 60, break: null },
  cleanTempDir: true,
};
