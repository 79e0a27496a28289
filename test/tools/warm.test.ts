import { afterEach, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import type { BashResult, PythonResult } from '../../src/server/sandbox/types.js';
import { execFileSync } from 'node:child_process';
import { startToolServer } from './helpers.js';

// A pooled sandbox is warmed before a job takes it (`warm`: bash at its prompt, python ready); the
// job's configure then keeps or restarts those processes. Real tool server, real bash and python.
describe('tool server: warm, then configure', () => {
  let t: Awaited<ReturnType<typeof startToolServer>> | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('warm answers once both tools are up; the same environment keeps them, a narrower tool list stops the others', async () => {
    t = await startToolServer({ env: { PATH: '/usr/bin:/bin', A: '1' } });
    expect(await t.client.call('warm', {})).toEqual({ warm: true });
    // Same env and limits: the warmed processes stay; python is no longer enabled and is stopped.
    await t.client.call('configure', { env: { PATH: '/usr/bin:/bin', A: '1' }, tools: ['bash'] });
    const b = await t.client.call<BashResult>('bash', { command: 'echo $A' });
    expect(b.output).toBe('1\n');
    await expect(t.client.call('python', { code: '1' })).rejects.toSatisfy(
      (e: unknown) => e instanceof RaasError && /not enabled/.test(e.message),
    );
  });

  it('a new environment or limits restarts the warmed tools with them (nothing of the old ones is left)', async () => {
    t = await startToolServer({ env: { PATH: '/usr/bin:/bin', A: '1' } });
    await t.client.call('warm', {});
    // The warmed bash and python are children of this tool server (it runs in this test's process).
    const children = (): number => Number(execFileSync('sh', ['-c', `pgrep -P ${process.pid} | wc -l`], { encoding: 'utf8' }).trim());
    const warmed = children();
    await t.client.call('configure', { env: { PATH: '/usr/bin:/bin', A: '2' }, limits: { processes: 77 } });
    expect((await t.client.call<BashResult>('bash', { command: 'echo $A; ulimit -u' })).output).toBe('2\n77\n');
    expect((await t.client.call<PythonResult>('python', { code: 'import os; os.environ["A"]' })).result).toBe("'2'");
    // The old bash and python were stopped: as many children as after the warm, not twice as many.
    await expect.poll(children).toBe(warmed);
    // Once a command ran, configure is refused as before.
    await expect(t.client.call('configure', { env: { A: '3' } })).rejects.toSatisfy(
      (e: unknown) => e instanceof RaasError && /before the first bash or python call/.test(e.message),
    );
  });
});
