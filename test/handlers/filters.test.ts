// Unreliable rewards are marked, not trained on: NeMo-Gym's five conditions
// (responses_api_agents/swe_agents/app.py@07d6b0d:3701-3723 — resolved at max iterations or at the
// context window, eval timeout, agent timeout, agent or eval out of memory) and a patch that does not
// apply give `filter_reason` (the pipeline then sets `filter: true`), each one configurable.
import { afterAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime } from '../../src/server/sandbox/index.js';
import type { SandboxRuntime } from '../../src/server/sandbox/types.js';
import { evaluatePatch, sweHandler } from '../../src/server/handlers/swe/index.js';
import { mathHandler } from '../../src/server/handlers/math/index.js';
import { agentOomReason, filterEnabled, limitReason } from '../../src/server/handlers/common/filter.js';
import { fallbackRun } from '../../src/server/pipeline/result.js';
import { bwrapRuntime, parseInstance, quietLog, stageContext } from './helpers.js';

const rt = bwrapRuntime('filters');
// A sandbox whose cgroup holds 160 MiB (128 for processes, 16 each for /tmp and the workspace).
const small = createSandboxRuntime({
  runtime: 'bwrap',
  root: `/var/tmp/raas-t-h4-filters-small-${process.pid}`,
  disk_mb: 16,
  limits: { memory_mb: 128, tmp_size_mb: 16 },
});
afterAll(async () => {
  await rt.dispose();
  await small.close();
});

const TEST = (body: string) => `import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n${body}\n`;
async function sweEval(body: string, patch: string, config: Record<string, unknown> = {}, runtime: SandboxRuntime = rt, timeoutS = 60) {
  const inst = await parseInstance<any>(sweHandler.instance, {
    problem_statement: 'x',
    files: { 'm.py': 'X = 1\n', 'test_m.py': TEST(body) },
    FAIL_TO_PASS: ['test_m.T.test_a'],
  });
  const ctx = stageContext(inst, runtime, config);
  try {
    return await evaluatePatch(ctx, patch, { testTimeoutS: timeoutS });
  } finally {
    await ctx.closeAll();
  }
}
const CHANGE = 'diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n';

describe('swe EVAL', { timeout: 120_000 }, () => {
  it('a patch that does not apply (git apply, then patch --fuzz=5, fail): patch_apply_failed; off when configured', async () => {
    const bad = 'diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-Y = 7\n+X = 2\n';
    const r = await sweEval('        pass', bad);
    expect([r.resolved, r.filter_reason, r.details.applied]).toEqual([false, 'patch_apply_failed', false]);
    expect((await sweEval('        pass', bad, { filter: { patch_apply_failed: false } })).filter_reason).toBeUndefined();
    expect((await sweEval('        pass', bad, { filter: false })).filter_reason).toBeUndefined();
  });

  it('a test run killed at handlers.swe.test_timeout_s: eval_timeout; a process exiting 124 by itself is no timeout', async () => {
    const slow = await sweEval('        import time\n        time.sleep(60)', CHANGE, {}, rt, 2);
    expect([slow.resolved, slow.filter_reason]).toEqual([false, 'eval_timeout']);
    const fake = await sweEval('        import os\n        os._exit(124)', CHANGE, {}, rt, 30);
    expect([fake.resolved, fake.filter_reason, fake.details.test_exit_code]).toEqual([false, undefined, 124]);
  });

  it("a test run whose processes the kernel killed for the sandbox's memory limit: eval_oom", async () => {
    const hog =
      '        import subprocess, sys\n        code = "import time; x = bytearray(90 << 20); time.sleep(2)"\n        ps = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]\n        [p.wait() for p in ps]';
    const r = await sweEval(hog, CHANGE, {}, small);
    expect(r.filter_reason, JSON.stringify(r.details).slice(0, 1500)).toBe('eval_oom');
    expect((await sweEval(hog, CHANGE, { filter: { eval_oom: false } }, small)).filter_reason).toBeUndefined();
  });
});

describe("the agent's end of the trajectory", () => {
  const mathEval = async (
    finish: 'finish' | 'max_iterations' | 'max_model_len' | 'max_response_tokens',
    answer: string,
    config: Record<string, unknown> = {},
  ) => {
    const inst = await parseInstance<any>(mathHandler.instance, { problem: '2+3?', answer: '5' });
    const ctx = { ...stageContext(inst, rt, config), log: quietLog, run: { ...fallbackRun(finish), artifacts: { answer } } };
    return mathHandler.eval(ctx as never);
  };

  it('resolved at max iterations or at the context window (NeMo-Gym: the reward is accidental)', async () => {
    expect((await mathEval('max_iterations', '5')).filter_reason).toBe('resolved_at_max_iterations');
    expect((await mathEval('max_model_len', '5')).filter_reason).toBe('resolved_at_max_context');
    expect((await mathEval('max_response_tokens', '5')).filter_reason).toBe('resolved_at_max_context');
    expect((await mathEval('finish', '5')).filter_reason).toBeUndefined();
    // An unresolved trajectory that hit a limit is an honest 0.
    expect((await mathEval('max_iterations', '4')).filter_reason).toBeUndefined();
    expect((await mathEval('max_iterations', '5', { filter: { resolved_at_max_iterations: false } })).filter_reason).toBeUndefined();
  });

  it("agent OOM (kills counted in the agent's cgroup during RUN) and the switches", () => {
    expect(agentOomReason({ artifacts: { agent_oom_kills: 2 } })).toBe('agent_oom');
    expect(agentOomReason({ artifacts: { agent_oom_kills: 0 } })).toBeUndefined();
    expect(limitReason({ finish_reason: 'max_iterations' }, false)).toBeUndefined();
    expect(filterEnabled({}, 'eval_oom')).toBe(true);
    expect(filterEnabled({ filter: { eval_oom: false } }, 'eval_oom')).toBe(false);
    expect(filterEnabled({ filter: { eval_oom: false } }, 'eval_timeout')).toBe(true);
    expect(filterEnabled({ filter: false }, 'grader_tampered')).toBe(false);
  });
});
