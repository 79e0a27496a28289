import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BashResult } from '../../src/server/sandbox/types.js';
import { startToolServer } from './helpers.js';

describe('tmux baseline backend (real tmux, OpenHands-style send-keys + capture-pane polling)', () => {
  let t: Awaited<ReturnType<typeof startToolServer>>;
  const bash = (command: string, o: Record<string, unknown> = {}): Promise<BashResult> =>
    t.client.call<BashResult>('bash', { command, ...o });
  beforeAll(async () => {
    t = await startToolServer({ bash_backend: 'tmux', tmux_poll_ms: 20, tools: ['bash'] });
  });
  afterAll(async () => t.close());

  it('runs commands with exit codes and persistent state', async () => {
    expect(await bash('echo hi')).toMatchObject({ output: 'hi', exit_code: 0 });
    expect((await bash('cd /tmp && (exit 5)')).exit_code).toBe(5);
    expect((await bash('pwd')).output).toBe('/tmp');
  });

  it('times out and interrupts with C-c', async () => {
    const r = await bash('sleep 30', { timeout_s: 0.3 });
    expect(r.timed_out).toBe(true);
    expect((await bash('echo after')).output).toBe('after');
  });
});
