import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime } from '../../src/server/sandbox/index.js';
import { testRoot } from './helpers.js';

// The warm pool does the handshake and the tools' start at fill time: open() of a default spec is
// its files only, and the replacement starts after open() returned. Real bwrap sandboxes.
describe('warm pool: warmed at fill time, refilled after open()', () => {
  const root = testRoot('pool-warm');
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('a default spec gets a warmed sandbox with fresh state, and the pool is full again afterwards', async () => {
    const rt = createSandboxRuntime({ runtime: 'bwrap', root, pool_size: 1 });
    rt.warmup();
    await rt.poolReady();
    const pooled = rt.openSandboxes();
    expect(pooled).toHaveLength(1);
    const sb = await rt.open({ files: { 'job.txt': 'job data' } });
    expect(pooled).toContain(sb);
    // The replacement has not started inside open(): only the taken sandbox is open right now.
    expect(rt.openSandboxes()).toEqual([sb]);
    expect((await sb.bash('cat job.txt')).output).toBe('job data');
    // Python was warmed with an empty cell: nothing is defined in its namespace yet.
    expect((await sb.python('"x" in dir()')).result).toBe('False');
    await rt.poolReady();
    expect(rt.openSandboxes()).toHaveLength(2);
    await sb.close();
    await rt.close();
    expect(fs.readdirSync(path.join(root, 'ws'))).toEqual([]);
  });
});
