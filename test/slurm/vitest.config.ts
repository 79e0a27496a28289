import { defineConfig } from 'vitest/config';

// `npm run test:slurm` (scripts/slurm-test.sh starts the local cluster first). Kept apart from
// `npm test`: its files end in .slurm.ts, which the main config does not include.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/slurm/**/*.slurm.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One job at a time: both scenarios use every node of the cluster and the same ports.
    fileParallelism: false,
    maxWorkers: 1,
  },
});
