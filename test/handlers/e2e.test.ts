import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import type { PolicyContext, SimPolicy } from '../../src/sim/policy.js';
import { toTaskRows, type TaskRow } from '../../src/sim/policies/rows.js';
import { DEFAULT_ALPHA, DEFAULT_BETA } from '../../src/sim/policies/index.js';
import { parseTranscript } from '../../src/sim/policies/transcript.js';
import { answersMatch } from '../../src/server/handlers/math/index.js';
import { DATA, readJsonl } from './helpers.js';

// End to end: the real rollout server (bwrap sandboxes) and the real simulated vLLM backend with the
// scripted policies over configs/data.
const SIM_SEED = 3;
const MALFORMED = 'Special test problem: how much is one plus one (malformed calls first)?';

/** A policy for one marker problem: a broken tool call, a call with bad arguments, then the answer. */
const malformedPolicy: SimPolicy = {
  name: 'malformed',
  respond(ctx: PolicyContext) {
    if (!ctx.promptText.includes(MALFORMED)) return undefined;
    const turn = parseTranscript(ctx.promptText).assistant.length;
    if (turn === 0) return { text: '<tool_call>\n{"name": "execute_ipython_cell", "arguments": {"code": "print(1)"\n</tool_call>' };
    if (turn === 1) return { text: '<tool_call>\n{"name": "execute_ipython_cell", "arguments": {"source": "print(1)"}}\n</tool_call>' };
    return { text: 'The answer is $\\boxed{2}$.\n<tool_call>\n{"name": "finish", "arguments": {}}\n</tool_call>' };
  },
};

const CHATTY = 'Special test task: print the number 1 (answered in prose).';
/** A policy for one code task that never calls a tool: the handler nudges, then grades the fenced code. */
const chattyPolicy: SimPolicy = {
  name: 'chatty',
  respond(ctx: PolicyContext) {
    if (!ctx.promptText.includes(CHATTY)) return undefined;
    const turn = parseTranscript(ctx.promptText).assistant.length;
    return { text: turn < 2 ? `Thinking about it (${turn}).` : 'Here it is:\n```python\nprint(1)\n```' };
  },
};

/** Rows as the sim sees them (same seed, same Beta): pick instances whose success is mixed. */
function mixed<T extends TaskRow['task']>(file: string, task: T): Extract<TaskRow, { task: T }> {
  const rows = toTaskRows(readJsonl(file), { seed: SIM_SEED, alpha: DEFAULT_ALPHA, beta: DEFAULT_BETA }) as Array<
    Extract<TaskRow, { task: T }>
  >;
  const row = rows.filter((r) => r.task === task).sort((a, b) => Math.abs(a.p - 0.5) - Math.abs(b.p - 0.5))[0];
  if (!row) throw new Error(`no ${task} row`);
  return row;
}

describe('math, code and swe end to end (rollout server + simulated backend + bwrap)', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-h4-e2e-${process.pid}`;

  async function post(route: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${srv.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
    });
    return { status: res.status, body: await res.json() };
  }
  /** n rollouts of one instance as one group (distinct job ids, so distinct seeds). */
  async function group(instance: Record<string, unknown>, n: number, tag: string, sampling: Record<string, unknown> = {}): Promise<any[]> {
    const answers = await Promise.all(
      Array.from({ length: n }, (_, k) =>
        post('/process', {
          instance,
          job_id: `${tag}-r${k}`,
          group_id: tag,
          sampling_params: { seed: 1, enable_thinking: false, ...sampling },
        }),
      ),
    );
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    return answers.map((a) => a.body);
  }
  const distinct = (results: any[]) => new Set(results.map((r) => JSON.stringify(r.tokens.response_ids))).size;

  beforeAll(async () => {
    sim = await startSim(
      { seed: SIM_SEED, datasets: ['math.jsonl', 'code.jsonl', 'swe.jsonl'].map((f) => path.join(DATA, f)) },
      { policies: [malformedPolicy, chattyPolicy] },
    );
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      sandbox: { runtime: 'bwrap', root },
      handlers: { code: { test_concurrency: 2 } },
    });
    expect((await post('/add_llm_server', { address: sim.url, api: 'vllm' })).status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('math: tool calls in a sandbox, boxed answers graded, a group whose rollouts differ', async () => {
    const row = mixed('math.jsonl', 'math');
    const results = await group({ ...row.instance }, 4, 'math-g');
    for (const r of results) {
      expect(r).toMatchObject({
        critical_error: null,
        finish_reason: 'finish',
        data_source: 'math',
        instance_id: row.instance.instance_id,
      });
      expect(r.messages.some((m: any) => m.role === 'tool')).toBe(true);
      expect(
        r.messages
          .filter((m: any) => m.role === 'assistant')
          .flatMap((m: any) => m.tool_calls ?? [])
          .map((c: any) => c.name),
      ).toContain('execute_ipython_cell');
      expect(r.reward).toBe(answersMatch(r.details.answer, String(row.instance.answer)) ? 1 : 0);
      expect(r.tools.map((t: any) => t.function.name)).toEqual(['execute_ipython_cell', 'think', 'finish']);
      expect(JSON.stringify(r.messages.slice(0, 2))).not.toContain('"answer"');
    }
    expect(distinct(results)).toBeGreaterThan(1);
    expect(new Set(results.map((r) => r.reward))).toEqual(new Set([0, 1]));
  }, 120_000);

  it('code: solution.py written with the editor, hidden tests in fresh sandboxes', async () => {
    const row = mixed('code.jsonl', 'code');
    const results = await group({ ...row.instance }, 3, 'code-g');
    for (const r of results) {
      expect(r).toMatchObject({ critical_error: null, finish_reason: 'finish', resolved: r.reward === 1 });
      expect(r.details.total).toBe(row.instance.tests.length);
      const prompt = r.messages
        .filter((m: any) => m.role !== 'assistant' && m.role !== 'tool')
        .map((m: any) => m.content)
        .join('\n');
      expect(prompt).not.toContain(row.instance.reference_solution!.trim());
      expect(prompt).not.toContain(row.instance.tests[1]!.output.trim() + '\n');
    }
    expect(distinct(results)).toBeGreaterThan(1);
  }, 120_000);

  it('swe: the repository is edited in the sandbox; git_patch is graded on a fresh copy', async () => {
    const row = mixed('swe.jsonl', 'swe');
    const results = await group({ ...row.instance }, 3, 'swe-g');
    for (const r of results) {
      expect(r).toMatchObject({ critical_error: null, finish_reason: 'finish' });
      expect(r.git_patch.length).toBeGreaterThan(0);
      // The scripted right answer replays the gold edits: its diff is the gold patch, byte for byte.
      expect(r.reward).toBe(r.git_patch === row.instance.gold_patch ? 1 : 0);
    }
    expect(distinct(results)).toBeGreaterThan(1);
    expect(new Set(results.map((r) => r.reward))).toEqual(new Set([0, 1]));
  }, 120_000);

  it('survives malformed tool calls, and a full context ends normally', async () => {
    const [r] = await group(
      { data_source: 'deepscaler', prompt: [{ role: 'user', content: MALFORMED }], reward_model: { ground_truth: '2' } },
      1,
      'malformed',
    );
    expect(r).toMatchObject({ critical_error: null, finish_reason: 'finish', reward: 1, data_source: 'math' });
    const tools = r.messages.filter((m: any) => m.role === 'tool').map((m: any) => m.content);
    expect(tools[0]).toMatch(/^ERROR: could not run this tool call/);
    expect(tools[1]).toMatch(/^ERROR: invalid arguments for execute_ipython_cell: code/);
    const math = readJsonl('math.jsonl')[0]!;
    const [full] = await group(math, 1, 'overflow', { max_model_len: 560 }); // the prompt is ~480 tokens: room for one turn
    // A normal end, never a critical error; the sequence stays inside the window. (finish_reason is
    // the agent's to decide: a turn cut by the window currently reports "finish".)
    expect(full).toMatchObject({ critical_error: null, reward: 0, end_properly: true });
    expect(full.tokens.prompt_ids.length + full.tokens.response_ids.length).toBeLessThanOrEqual(560);
  }, 120_000);

  it('nudges a model that answers without tools, then grades the fenced code of its last message', async () => {
    const [r] = await group({ data_source: 'code', problem: CHATTY, tests: [{ input: '', output: '1\n' }] }, 1, 'chatty');
    expect(r).toMatchObject({ critical_error: null, finish_reason: 'finish', reward: 1, num_turns: 3 });
    const nudges = r.messages
      .filter((m: any) => m.role === 'user')
      .slice(1)
      .map((m: any) => m.content);
    expect(nudges).toHaveLength(2);
    expect(nudges[0]).toMatch(/^Continue with the tools/);
  }, 60_000);

  it('math with thinking on: the model thinks, then acts; veRL rows graded the same way', async () => {
    const row = readJsonl('math-verl.jsonl')[1]!;
    const [r] = await group(row, 1, 'thinking', { enable_thinking: true });
    expect(r).toMatchObject({
      critical_error: null,
      finish_reason: 'finish',
      data_source: 'math',
      instance_id: (row.extra_info as { index: string }).index,
    });
    const assistants = r.messages.filter((m: any) => m.role === 'assistant');
    for (const m of assistants) expect(m.content).toMatch(/^<think>\n[\s\S]*<\/think>\n\n/);
    expect(r.reward).toBe(answersMatch(r.details.answer, String((row.reward_model as { ground_truth: string }).ground_truth)) ? 1 : 0);
  }, 60_000);

  it('rejects bad instances with a 400 naming the field, before any sandbox', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ data_source: 'math', problem: 'What is 1+1?' }, /answer/],
      [{ data_source: 'deepcoder', problem: 'x', tests: [] }, /tests/],
      [{ data_source: 'swe', problem_statement: 'bug', FAIL_TO_PASS: ['t'] }, /files/],
    ];
    for (const [instance, field] of cases) {
      const r = await post('/process', { instance });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(field);
    }
    expect(fs.existsSync(path.join(root, 'ws')) ? fs.readdirSync(path.join(root, 'ws')).length : 0).toBe(0);
  });
});
