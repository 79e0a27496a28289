// Mutation testing of one target of test/mutation/targets.json (RAAS_MUTATION_TARGET), run by
// `npm run test:mutation [-- <target>...]` (test/mutation/run.ts), never by `npm test`.
import { readFileSync } from 'node:fs';

const targets = JSON.parse(readFileSync(new URL('./test/mutation/targets.json', import.meta.url), 'utf8'));
const target = process.env.RAAS_MUTATION_TARGET;
if (!targets[target]) throw new Error(`RAAS_MUTATION_TARGET=${target}: not one of ${Object.keys(targets).join(', ')}`);
const out = `reports/mutation/${target}${process.env.RAAS_MUTATION_BASELINE === '1' ? '-baseline' : ''}`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: targets[target].mutate,
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
  // The sandbox copy needs the sources, the tests and their fixtures only.
  ignorePatterns: ['dist', 'runs', 'reports', 'bench', 'docs', 'examples', 'bridges', 'scripts', '.raas', 'scratch', '*.log'],
  // A mutant that hangs a test is detected (Timeout) after its tests' own time × 1.5 + 3 s.
  timeoutMS: 3_000,
  timeoutFactor: 1.5,
  thresholds: { high: 80, low: 60, break: null },
  cleanTempDir: true,
};
