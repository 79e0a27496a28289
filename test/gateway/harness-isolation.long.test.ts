import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { call, scriptPolicy } from '../agent/script-policy.js';
import { DATA, readJsonl } from '../handlers/helpers.js';
import { processTable } from '../helpers/procs.js';

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

describe('harness handler: the swe grader; timeouts end the process tree; what the sandbox sees', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-gwl-${process.pid}`;
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
    sim = await startSim({ port: 0, seed: 5, request_log: 1000, datasets: [path.join(DATA, 'swe.jsonl')] }, { policies: [policy] });
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

  it('swe grader: the harness fixes a repository (git apply through its own tool), the diff it leaves is graded by the tests', async () => {
    const row = readJsonl('swe.jsonl')[0]!;
    const results = await Promise.all(
      [1, 2, 3].map(async (k) => {
        const r = await post('/process', {
          instance: { ...row, data_source: 'harness', harness: 'mini', grader: 'swe' },
          job_id: `swe-${k}`,
          sampling_params: { enable_thinking: false, seed: k },
        });
        expect(r.status).toBe(200);
        return r.body;
      }),
    );
    for (const res of results) {
      expect(res.critical_error, `${res.error}\n${res.harness?.output_tail}`).toBeNull();
      const applied = res.messages.some((m: any) =>
        (m.tool_calls ?? []).some((c: any) => String(c.arguments.command).includes('git apply')),
      );
      // Graded as the swe handler grades: resolved exactly when the fix was applied.
      expect(res.resolved).toBe(applied);
      expect(res.reward).toBe(applied ? 1 : 0);
      expect(res.git_patch.length > 0).toBe(applied);
      expect(res.details.harness).toMatchObject({ exit_code: 0 });
    }
  }, 180_000);

  it('a harness past its timeout_s is ended with its whole process tree', async () => {
    const answer = post('/process', {
      instance: { data_source: 'harness', harness: 'sleepy', grader: 'none', prompt: 'SCRIPT:slow', instance_id: 's1' },
      job_id: 'h-2',
      sampling_params: { enable_thinking: false },
    });
    // The sandbox's pid namespace, read off its harness process while it runs: other suites on the
    // machine may run look-alike processes, so the check after the timeout is scoped to it.
    let ns: string | undefined;
    let done = false;
    void answer.finally(() => (done = true));
    while (!ns && !done) {
      ns = processTable().find((p) => p.cmd.includes('/harness/sleepy/mini_agent.py'))?.ns;
      if (!ns) await new Promise((r) => setTimeout(r, 50));
    }
    const r = await answer;
    expect(r.status).toBe(200);
    expect(r.body.harness).toMatchObject({ name: 'sleepy', timed_out: true });
    expect(r.body.finish_reason).toBe('timeout');
    expect(ns, 'the harness process was seen running').toBeDefined();
    // Nothing of the sandbox is left: no sleep, no harness, no relay.
    const left = processTable().filter((p) => p.ns === ns);
    expect(left).toEqual([]);
  }, 60_000);

  it('inside the sandbox: only a loopback interface, the gateway directory read-only and unlistable, its socket reachable by name', async () => {
    const r = await post('/process', {
      instance: { data_source: 'harness', harness: 'probe', grader: 'none', prompt: 'x' },
      job_id: 'h-probe',
    });
    expect(r.body.harness.exit_code, r.body.harness.output_tail).toBe(0);
    const lines = (r.body.harness.output_tail as string).trim().split('\n');
    expect(lines[0]).toBe('GATEWAY_DIR_READONLY');
    // Reachable by its name only: the directory (0711) cannot be listed.
    expect(lines[1]).toBe('UNLISTABLE');
    expect(lines[2]).toBe('SOCKET');
    expect(lines[3]!.trim()).toBe('lo');
    expect(lines[4]).toMatch(/^BASE=http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });
});
