import { defineConfig } from 'vitest/config';

/**
 * The long files (each over about 20 s of a worker's time on 2 cores) run as `npm run test:long`, so
 * `npm test` stays under 8 minutes; CI (.ci/run) runs both. A long file is named `*.long.test.ts`,
 * or listed here. RAAS_TESTS=long runs only them, RAAS_TESTS=all everything (the reliability report).
 */
const LONG = [
  'test/**/*.long.test.ts',
  'test/docs/executed.test.ts',
  'test/reliability/faults-matrix.test.ts',
  'test/reliability/faults-backend-health.test.ts',
  'test/reliability/resume.test.ts',
  'test/sidecar/python.test.ts',
  'test/sidecar/learn.test.ts',
  'test/sidecar/learn-selection.test.ts',
];
const which = process.env.RAAS_TESTS ?? 'default';

export default defineConfig({
  test: {
    include: which === 'long' ? LONG : ['test/**/*.test.ts'],
    exclude: which === 'default' ? ['**/node_modules/**', ...LONG] : ['**/node_modules/**'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // 2-core machines: two files at a time keeps sandboxes and servers from starving each other.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
