// Red team, the event loop: model and tool output that is cheap to produce and expensive to read —
// tokenizer floods (tens of thousands of CJK characters, one BPE word), tool calls nested
// thousands deep. The server must keep answering (/health, other jobs) and end every job with a
// result. The server runs in this process, so its event loop is measured directly.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answered, bash, codeTask, finish, observations, startHarness, summary, type Harness } from './helpers.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('flood');
}, 120_000);
afterAll(() => h?.close());

/** A python one-liner printing n CJK characters of one unbroken run (no spaces: one pre-token). */
const cjkFlood = (n: number, seed: number): string =>
  `python3 -c "import sys; sys.stdout.write(''.join(chr(0x4e00 + (i * 7919 + ${seed}) % 20000) for i in range(${n})))"`;

describe('tokenizer floods do not stall the server', () => {
  it('five jobs whose tools print 10,000 CJK characters (16,000 tokens) twice each: every flood is encoded off the event loop and every job answers', async () => {
    const jobs = Array.from({ length: 5 }, (_, k) => {
      const m = h.script(`flood-cjk-${k}`, [bash(cjkFlood(10_000, k * 2)), bash(cjkFlood(10_000, k * 2 + 1)), finish()]);
      return h.process({ instance: codeTask(m) }, 180_000);
    });
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const health: number[] = [];
    const probe = setInterval(() => void h.health().then((ms) => health.push(ms)), 200);
    const answers = await Promise.all(jobs);
    clearInterval(probe);
    loop.disable();
    for (const a of answers) {
      const r = answered(a);
      const obs = observations(r);
      expect(obs.length, summary(r)).toBeGreaterThanOrEqual(2);
      for (const o of obs.slice(0, 2)) expect(o.length).toBeGreaterThan(9_000);
    }
    expect(health.length).toBeGreaterThan(0);
    if (process.env.RT_DEBUG)
      console.log(
        `/health max ${Math.max(...health).toFixed(0)} ms over ${health.length} probes; event loop max ${(loop.max / 1e6).toFixed(0)} ms`,
      );
    // What keeps the event loop free: every flood was encoded on the worker pool. The latency bounds
    // are for gross stalls only (a loaded CI machine stalls everything); bench:flood measures the
    // p99 against the main-thread baseline on a quiet one.
    const offloaded = Number(
      /^raas_tokenizer_offloaded_chars_total (\d+)/m.exec(
        await (await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${h.secrets.token}` } })).text(),
      )?.[1] ?? 0,
    );
    expect(offloaded, 'characters encoded off the event loop').toBeGreaterThanOrEqual(5 * 2 * 10_000);
    expect(Math.max(...health), '/health latency while the floods ran (ms)').toBeLessThan(1500);
    expect(loop.max / 1e6, 'longest event-loop stall of the server during the floods (ms)').toBeLessThan(1500);
  }, 240_000);
});

describe('tool calls nested thousands deep', () => {
  it.each([6_000, 30_000])(
    'arguments nested %i arrays deep: an invalid tool call, the job ends with a result and leaves nothing counted',
    async (depth) => {
      const deep = `${'['.repeat(depth)}1${']'.repeat(depth)}`;
      const m = h.script(`flood-deep-${depth}`, [
        `<tool_call>\n{"name": "execute_bash", "arguments": {"command": "echo", "x": ${deep}}}\n</tool_call>`,
        bash('echo still-here'),
        finish(),
      ]);
      // The whole call fits one turn (a bracket is one token), so it is the parser that must refuse it.
      const a = await h.process(
        { instance: codeTask(m), sampling_params: { seed: 1, enable_thinking: false, max_tokens_per_turn: 2 * depth + 200 } },
        120_000,
      );
      const r = answered(a);
      expect(r.critical_error, summary(r)).toBeNull();
      const obs = observations(r);
      expect(obs[0]).toMatch(/nests \d+ levels deep; at most 64 are read/);
      expect(obs[1]).toContain('still-here');
      const calls = (r.messages as Array<{ role: string; tool_calls?: Array<{ name: string }> }>).filter((x) => x.role === 'assistant')[0]!
        .tool_calls!;
      expect(calls.map((c) => c.name)).toEqual(['invalid_tool_call']);
      const job = await h.get(`/jobs/${encodeURIComponent(r.job_id)}`);
      expect(job.state).toBe('done');
      expect(job.result?.job_id).toBe(r.job_id);
      const status = await h.get('/status');
      expect(status.jobs).toBe(0);
      expect(status.in_stage).toBe(0);
    },
    150_000,
  );
});
