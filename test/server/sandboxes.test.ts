import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import type { Sandbox } from '../../src/server/sandbox/types.js';
import { post } from './helpers.js';

const alive = (pid: number | undefined): boolean => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// Real sandboxes (the `process` runtime: the tool server as a child process) opened through ctx.sandboxes.open.
describe('the pipeline closes the sandboxes each stage opened', () => {
  let srv: RolloutServer;
  let root: string;
  const opened: Record<string, Sandbox> = {};
  const openAt: Record<string, boolean> = {};
  const handler: AgentHandler<{ cancel_in_run?: boolean }> = {
    name: 'boxes',
    instance: z.looseObject({ cancel_in_run: z.boolean().optional() }),
    async init(ctx) {
      const runtime = await ctx.sandboxes.open({ tools: ['bash'] });
      opened.extra = await ctx.sandboxes.open({ tools: ['bash'] });
      opened.runtime = runtime;
      return { runtime };
    },
    async run(ctx) {
      opened.run = await ctx.sandboxes.open({ tools: ['bash'] });
      // INIT's extra sandbox is gone; its runtime is still here for RUN.
      openAt.extraDuringRun = alive(opened.extra?.pid);
      openAt.runtimeDuringRun = (await ctx.runtime!.bash('echo ok')).output.includes('ok');
      if (ctx.job.instance.cancel_in_run) {
        openAt.waiting = true;
        await new Promise((_, reject) => {
          if (ctx.signal.aborted) reject(ctx.signal.reason);
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        });
      }
      return {
        messages: [],
        tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
        finish_reason: 'finish',
        artifacts: {},
      };
    },
    async eval(ctx) {
      openAt.runtimeDuringEval = alive(opened.runtime?.pid);
      opened.eval = await ctx.sandboxes.open({ tools: ['bash'] });
      return { reward: 1, resolved: true };
    },
  };

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'raas-sbx-'));
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', sandbox: { runtime: 'process', root }, llm: { backends: [{ address: 'http://127.0.0.1:9' }] } },
      { handlers: [handler] },
    );
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await rm(root, { recursive: true, force: true });
  });

  const expectClosed = async (s: Sandbox) => {
    await expect(s.bash('true')).rejects.toThrow(/closed/);
    expect(alive(s.pid)).toBe(false);
  };

  it('closes stage sandboxes at stage end, and the runtime right after RUN', async () => {
    const r = await post(`${srv.url}/process`, { instance: { data_source: 'boxes' } });
    expect(r.body.critical_error).toBeNull();
    expect(openAt).toMatchObject({ extraDuringRun: false, runtimeDuringRun: true, runtimeDuringEval: false });
    for (const k of ['runtime', 'extra', 'run', 'eval']) await expectClosed(opened[k]);
  }, 60_000);

  it('closes them on cancel', async () => {
    for (const k of Object.keys(opened)) delete opened[k];
    const held = post(`${srv.url}/process`, { instance: { data_source: 'boxes', cancel_in_run: true }, job_id: 'box-cancel' });
    delete openAt.waiting;
    // Cancel once RUN waits on its signal (a cooperative stage: its sandboxes close before the answer).
    for (let i = 0; i < 400 && !openAt.waiting; i++) await new Promise((r) => setTimeout(r, 50));
    await post(`${srv.url}/cancel`, { job_id: 'box-cancel' });
    expect((await held).body.critical_error).toBe('cancelled');
    for (const k of ['runtime', 'extra', 'run']) await expectClosed(opened[k]);
  }, 60_000);

  it('refuses a bad sandbox setting at start, naming the key', async () => {
    await expect(startRolloutServer({ port: 0, log_level: 'silent', sandbox: { runtime: 'docker' } })).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringContaining('sandbox.runtime'),
    });
  });
});
