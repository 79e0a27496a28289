import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import type { BashResult } from '../../src/server/sandbox/types.js';
import { startToolServer } from './helpers.js';

const isToolError = (re: RegExp) => (e: unknown) => e instanceof RaasError && e.code === 'tool_error' && re.test(e.message);

describe('tool server: bad input gets an error answer and the server keeps serving', () => {
  let t: Awaited<ReturnType<typeof startToolServer>>;
  beforeAll(async () => {
    t = await startToolServer({ max_input_bytes: 64 * 1024 });
  });
  afterAll(async () => t.close());
  const alive = async (): Promise<void> =>
    expect((await t.client.call<BashResult>('bash', { command: 'echo alive' })).output).toBe('alive\n');

  it('unknown tool', async () => {
    await expect(t.client.call('launch_missiles', {})).rejects.toSatisfy(isToolError(/unknown tool/));
    await alive();
  });

  it('malformed JSON and non-object lines', async () => {
    t.client.sendRaw('{not json\n[1,2]\n"str"\n');
    await alive();
  });

  it('huge command is refused, also past the line limit', async () => {
    await expect(t.client.call('bash', { command: 'x'.repeat(100 * 1024) })).rejects.toSatisfy(isToolError(/over the limit/));
    t.client.sendRaw('{"id": 999999, "tool": "bash", "command": "' + 'y'.repeat(300 * 1024) + '"}\n');
    await alive();
  });

  it('wrong field types', async () => {
    await expect(t.client.call('bash', { command: 42 })).rejects.toSatisfy(isToolError(/must be a string/));
    await expect(t.client.call('bash', { command: 'echo', timeout_s: -1 })).rejects.toSatisfy(isToolError(/positive number/));
    await expect(t.client.call('edit', { op: 'view' })).rejects.toSatisfy(isToolError(/op must be an object/));
    await expect(t.client.call('python', {})).rejects.toSatisfy(isToolError(/code must be a string/));
    await alive();
  });

  it('configure is refused once bash or python ran', async () => {
    await t.client.call('bash', { command: 'true' });
    await expect(t.client.call('configure', { env: { A: '1' } })).rejects.toSatisfy(isToolError(/before the first bash or python call/));
  });

  it('bash and python run at the same time', async () => {
    const [b, p] = await Promise.all([
      t.client.call<BashResult>('bash', { command: 'sleep 0.3; echo b' }),
      t.client.call<{ stdout: string }>('python', { code: 'import time\ntime.sleep(0.3)\nprint("p")' }),
    ]);
    expect(b.output).toBe('b\n');
    expect(p.stdout).toBe('p\n');
  });
});
