import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { DATA, readJsonl } from '../handlers/helpers.js';
import { processTable } from '../helpers/procs.js';
import { installHarness, QWEN_CODE, sandboxReadable } from './harnesses.js';

// A real agent CLI from the npm registry, unmodified: @qwen-code/qwen-code 0.24.4 (the Gemini CLI
// fork Qwen ships) in a bwrap sandbox without network, its OpenAI chat completions calls through the
// job's gateway to the simulator, which answers in qwen-code's own tool schema (write_file,
// run_shell_command: src/sim/policies/harness.ts). The job is graded by the code task's hidden tests.

describe('qwen-code 0.24.4 as the environment', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-qwen-${process.pid}`;
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
    const prefix = installHarness(QWEN_CODE);
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
            'qwen-code': {
              command: ['qwen', '-p', '{prompt}', '--yolo', '--auth-type', 'openai'],
              env: { OPENAI_MODEL: 'raas-policy', QWEN_CODE_SUPPRESS_YOLO_WARNING: '1' },
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

  it('writes solution.py and runs it through its own tools, is graded by the hidden tests, and its ids are what the simulator sampled', async () => {
    const row = readJsonl('code.jsonl')[0]!;
    const r = await post('/process', {
      instance: { ...row, data_source: 'harness', harness: 'qwen-code', grader: 'code' },
      job_id: 'qwen-1',
      sampling_params: { enable_thinking: false, seed: 4 },
    });
    expect(r.status).toBe(200);
    const res = r.body;
    expect(res.critical_error, `${res.error}\n${res.harness?.output_tail}`).toBeNull();
    expect(res.harness, res.harness?.output_tail).toMatchObject({ name: 'qwen-code', exit_code: 0, timed_out: false });
    // The scripted turns went through qwen-code's own tools: the file was written, the command ran.
    const main = res.messages;
    const calls = main.flatMap((m: any) => m.tool_calls ?? []).map((c: any) => c.name);
    expect(calls).toEqual(['write_file', 'run_shell_command']);
    expect(res.details.total).toBe((row.tests as unknown[]).length);
    const wroteReference = JSON.stringify(main).includes(JSON.stringify(String(row.reference_solution)).slice(1, 40));
    expect(res.reward).toBe(res.details.passed === res.details.total ? 1 : 0);
    expect(res.reward === 1).toBe(wroteReference);
    // Token-exact, call for call: every request the simulator answered for this job is in one of its
    // segments (the main conversation, and any side conversation qwen-code opened), prompt and ids.
    const mine = sim.requestLog.filter((e) => e.request_id.startsWith('qwen-1-'));
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
    expect(processTable().filter((p) => /qwen|relay\.mjs/.test(p.cmd) && p.cmd.includes(root))).toEqual([]);
  }, 600_000);
});
