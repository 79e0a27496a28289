import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { DATA, readJsonl } from '../handlers/helpers.js';
import { processTable } from '../helpers/procs.js';
import { CLAUDE_CODE, installHarness, sandboxReadable } from './harnesses.js';

// A second real agent CLI from the npm registry, unmodified: @anthropic-ai/claude-code 2.1.332 (a
// native binary) in a bwrap sandbox without network, its Anthropic messages calls (streamed) through
// the job's gateway to the simulator, which answers in Claude Code's own tool schema (Write, Bash:
// src/sim/policies/harness.ts). The job is graded by the code task's hidden tests.

describe('claude-code 2.1.332 as the environment', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-claude-${process.pid}`;
  let harnessDir: string;

  async function post(route: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${srv.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
    });
    return { status: res.status, body: await res.json() };
  }

  beforeAll(async () => {
    const prefix = installHarness(CLAUDE_CODE);
    fs.mkdirSync(root, { recursive: true, mode: 0o755 });
    harnessDir = sandboxReadable(prefix, root);
    sim = await startSim({
      port: 0,
      seed: 11,
      request_log: 1000,
      datasets: [path.join(DATA, 'code.jsonl'), path.join(DATA, 'math.jsonl')],
    });
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      sandbox: { runtime: 'bwrap', root: path.join(root, 'sb') },
      handlers: {
        harness: {
          harnesses: {
            'claude-code': {
              command: ['claude', '-p', '{prompt}', '--dangerously-skip-permissions'],
              env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },
              dir: harnessDir,
              timeout_s: 300,
            },
          },
        },
      },
    });
    expect((await post('/add_llm_server', { address: sim.url, api: 'vllm' })).status).toBe(200);
  }, 900_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('writes solution.py with Write, runs it with Bash, is graded by the hidden tests, and its ids are what the simulator sampled', async () => {
    const row = readJsonl('code.jsonl')[0]!;
    const r = await post('/process', {
      instance: { ...row, data_source: 'harness', harness: 'claude-code', grader: 'code' },
      job_id: 'claude-1',
      sampling_params: { enable_thinking: false, seed: 4 },
    });
    expect(r.status).toBe(200);
    const res = r.body;
    expect(res.critical_error, `${res.error}\n${res.harness?.output_tail}`).toBeNull();
    expect(res.harness, res.harness?.output_tail).toMatchObject({ name: 'claude-code', exit_code: 0, timed_out: false });
    // The scripted turns went through Claude Code's own tools: the file was written, the command ran.
    const main = res.messages;
    const calls = main.flatMap((m: any) => m.tool_calls ?? []).map((c: any) => c.name);
    expect(calls).toEqual(['Write', 'Bash']);
    expect(res.gateway.calls_asked.every((c: any) => c.api === 'messages' && c.stream === true)).toBe(true);
    expect(res.details.total).toBe((row.tests as unknown[]).length);
    const wroteReference = JSON.stringify(main).includes(JSON.stringify(String(row.reference_solution)).slice(1, 40));
    expect(res.reward).toBe(res.details.passed === res.details.total ? 1 : 0);
    expect(res.reward === 1).toBe(wroteReference);
    // Token-exact, call for call: every request the simulator answered for this job is in one of its
    // segments (the main conversation, and any side conversation Claude Code opened), prompt and ids.
    const mine = sim.requestLog.filter((e) => e.request_id.startsWith('claude-1-'));
    expect(mine.length).toBe(res.gateway.calls);
    const segments: any[] = res.segments ?? [{ ...res.tokens, index: 0, parent: null }];
    for (const e of mine) {
      const seg = segments.find((s) => {
        const seq = [...s.prompt_ids, ...s.response_ids];
        const at = e.prompt_ids.length;
        return (
          seq.slice(0, at).every((v: number, i: number) => v === e.prompt_ids[i]) &&
          e.ids.every((v: number, i: number) => seq[at + i] === v)
        );
      });
      expect(seg, `call ${e.request_id} is in no segment`).toBeDefined();
      const off = e.prompt_ids.length - seg.prompt_ids.length;
      expect(seg.response_mask.slice(off, off + e.ids.length).every((m: number) => m === 1)).toBe(true);
      expect(seg.logprobs.slice(off, off + e.ids.length)).toEqual(e.logprobs);
    }
    // Its main conversation only grew: nothing of it was tokenised twice.
    expect(res.gateway.segments).toBeGreaterThanOrEqual(1);
    expect(processTable().filter((p) => /claude|relay\.mjs/.test(p.cmd) && p.cmd.includes(root))).toEqual([]);
  }, 600_000);
});
