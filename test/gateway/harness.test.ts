import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { call, scriptPolicy } from '../agent/script-policy.js';

// The harness handler end to end: the rollout server with bwrap sandboxes, the simulated vLLM
// backend, and an agent harness of our own in Python's standard library (examples/harness/mini_agent.py)
// that streams chat completions from the gateway through the loopback relay.
const here = path.dirname(fileURLToPath(import.meta.url));

const policy = scriptPolicy({
  mini: [
    `Let me compute it.\n${call('run', { command: "python3 -c 'print(6*7)'" })}`,
    call('write_file', { path: 'answer.txt', content: '42' }),
    `${call('run', { command: 'cat answer.txt' })}`,
    'The answer is \\boxed{42}.',
  ],
  slow: [call('run', { command: 'sleep 30' })],
});

describe('harness handler: an agent CLI in a bwrap sandbox, its calls through the job gateway', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-gw-${process.pid}`;
  // The operator's harness directory: readable by the sandbox user, bound read-only.
  const harnessDir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-harness-'));

  async function post(route: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${srv.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
    });
    return { status: res.status, body: await res.json() };
  }

  beforeAll(async () => {
    fs.chmodSync(harnessDir, 0o755);
    fs.copyFileSync(path.join(here, '../../examples/harness/mini_agent.py'), path.join(harnessDir, 'mini_agent.py'));
    fs.chmodSync(path.join(harnessDir, 'mini_agent.py'), 0o644);
    sim = await startSim({ port: 0, seed: 5, request_log: 1000 }, { policies: [policy] });
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      sandbox: { runtime: 'bwrap', root },
      handlers: {
        harness: {
          harnesses: {
            mini: { command: ['python3', '/opt/raas/harness/mini/mini_agent.py', '{prompt}'], dir: harnessDir, timeout_s: 120 },
            probe: {
              command: [
                'bash',
                '-c',
                'touch /run/raas-gateway/x 2>/dev/null && echo GATEWAY_DIR_WRITABLE || echo GATEWAY_DIR_READONLY; (ls /run/raas-gateway >/dev/null 2>&1 && echo LISTABLE || echo UNLISTABLE); test -S /run/raas-gateway/gateway.sock && echo SOCKET; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\\n" " "; echo; echo "BASE=$OPENAI_BASE_URL"',
              ],
              timeout_s: 30,
            },
            sleepy: { command: ['python3', '/opt/raas/harness/sleepy/mini_agent.py'], dir: harnessDir, timeout_s: 3 },
          },
        },
      },
    });
    expect((await post('/add_llm_server', { address: sim.url, api: 'vllm' })).status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(harnessDir, { recursive: true, force: true });
  });

  it('runs the harness unmodified, grades the math answer from its final message, and the ids are what the backend sampled', async () => {
    const r = await post('/process', {
      instance: {
        data_source: 'harness',
        harness: 'mini',
        grader: 'math',
        problem: 'What is 6 times 7? SCRIPT:mini',
        answer: '42',
        instance_id: 'm1',
      },
      job_id: 'h-1',
      sampling_params: { enable_thinking: false, temperature: 0.7, max_tokens_per_turn: 300 },
    });
    expect(r.status).toBe(200);
    const res = r.body;
    expect(res.critical_error, JSON.stringify(res).slice(0, 2000)).toBeNull();
    expect(res.harness).toMatchObject({ name: 'mini', exit_code: 0, timed_out: false });
    expect(res.harness.output_tail).toContain('The answer is \\boxed{42}.');
    expect(res).toMatchObject({ finish_reason: 'finish', reward: 1, resolved: true, data_source: 'harness' });
    // The commands ran in the sandbox: their output came back as tool results.
    const tools = res.messages.filter((m: any) => m.role === 'tool').map((m: any) => m.content);
    expect(tools[0]).toContain('42');
    expect(tools[2]).toContain('42');
    // Append-only harness: one segment, every call extended it, nothing re-tokenised.
    expect(res.gateway).toMatchObject({ calls: 4, segments: 1, retokenized_tokens: 0, invalid_tool_calls: 0 });
    expect(res.segments).toBeUndefined();
    // What the harness asked (temperature 0.2) is recorded; the trainer's sampling_params are what
    // the backend got (the gateway forwards no sampling field of the harness's: its cap of 300 here).
    expect(res.gateway.calls_asked[0]).toMatchObject({ api: 'chat', temperature: 0.2, stream: true, max_tokens_sent: 300 });
    const mine = sim.requestLog.filter((e) => e.request_id.startsWith('h-1-'));
    expect(mine).toHaveLength(4);
    for (const e of mine) expect(e.max_tokens).toBe(300);
    // Call for call: each prompt is the sequence so far, each sampled id is in the trajectory unchanged.
    const seq = [...res.tokens.prompt_ids, ...res.tokens.response_ids];
    let at = res.tokens.prompt_ids.length;
    for (const e of mine) {
      expect(seq.slice(0, e.prompt_ids.length)).toEqual(e.prompt_ids);
      at = e.prompt_ids.length;
      expect(res.tokens.response_ids.slice(at - res.tokens.prompt_ids.length, at - res.tokens.prompt_ids.length + e.ids.length)).toEqual(
        e.ids,
      );
      expect(
        res.tokens.response_mask
          .slice(at - res.tokens.prompt_ids.length, at - res.tokens.prompt_ids.length + e.ids.length)
          .every((m: number) => m === 1),
      ).toBe(true);
    }
    expect(res.tokens.response_mask.reduce((a: number, b: number) => a + b, 0)).toBe(mine.reduce((n, e) => n + e.ids.length, 0));
  }, 120_000);

  it('an unknown harness is a clear INIT error; a task field its grader needs is a 400 naming it', async () => {
    const bad = await post('/process', { instance: { data_source: 'harness', harness: 'mini', grader: 'math', problem: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/instance\.answer/);
    const r = await post('/process', { instance: { data_source: 'harness', harness: 'nope', grader: 'none', prompt: 'p' } });
    expect(r.status).toBe(200);
    expect(r.body.critical_error).toBe('init');
    expect(r.body.error).toMatch(/no harness "nope" is configured \(configured: mini, probe, sleepy\)/);
  });
});
