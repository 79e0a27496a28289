import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // 2-core machines: two files at a time keeps sandboxes and servers from starving each other.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
