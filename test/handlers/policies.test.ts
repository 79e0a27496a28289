import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parquetWriteFile } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ALPHA, DEFAULT_BETA, loadPolicies, policiesFor } from '../../src/sim/policies/index.js';
import { successProbability, toTaskRows, type TaskRow } from '../../src/sim/policies/rows.js';
import { parseCalls, parseTranscript } from '../../src/sim/policies/transcript.js';
import type { PolicyContext, SimPolicy } from '../../src/sim/policy.js';
import { mathPrompt } from '../../src/server/handlers/math/index.js';
import { codePrompt } from '../../src/server/handlers/code/index.js';
import { swePrompt } from '../../src/server/handlers/swe/index.js';
import { firstMessages } from '../../src/server/handlers/common/run.js';
import { toolDefinitions } from '../../src/server/handlers/common/tools.js';
import { CHAT_USER_MESSAGE } from '../../src/server/handlers/chat.js';
import { qwen3Tokenizer, type ChatMessage } from '../../src/tokens/index.js';
import { rng, seedOf } from '../../src/util/hash.js';
import { DATA, readJsonl } from './helpers.js';

const tok = qwen3Tokenizer();
const TOOLS = toolDefinitions(['execute_bash', 'str_replace_editor', 'execute_ipython_cell', 'think', 'finish']);

function ctx(promptText: string, seed: number, extra: Partial<PolicyContext> = {}): PolicyContext {
  return { promptText, promptIds: [], rng: rng(seed), weightVersion: '0', updates: 0, boostPerUpdate: 0.03, ...extra };
}
function prompt(messages: ChatMessage[], enableThinking = false): string {
  return tok.decode(tok.renderPrompt(messages, { tools: TOOLS, enableThinking }));
}
function ask(policies: SimPolicy[], c: PolicyContext): string | undefined {
  for (const p of policies) {
    const t = p.respond(c);
    if (t) return t.text;
  }
  return undefined;
}

describe('scripted sim policies', async () => {
  const policies = await loadPolicies(
    ['math.jsonl', 'code.jsonl', 'swe.jsonl', 'math-verl.jsonl'].map((f) => path.join(DATA, f)),
    { seed: 7 },
  );
  const math = readJsonl('math.jsonl');
  const code = readJsonl('code.jsonl');
  const swe = readJsonl('swe.jsonl');
  const first = (user: string) => prompt(firstMessages('system', user));

  it('loads one policy per task', () => expect(policies.map((p) => p.name)).toEqual(['math', 'code', 'swe']));

  it('recognises an instance from the decoded prompt and answers with a real tool call', () => {
    const cases: Array<[string, string[]]> = [
      [first(mathPrompt(math[3]!.problem as string)), ['execute_ipython_cell', 'think']],
      [first(codePrompt(code[0]!.problem as string)), ['str_replace_editor', 'execute_bash']],
      [first(swePrompt(swe[0] as never)), ['execute_bash']],
    ];
    for (const [text, names] of cases) {
      const out = ask(policies, ctx(text, 1))!;
      expect(out).toMatch(/^[^<]*\n<tool_call>\n\{.*\}\n<\/tool_call>$/s);
      const calls = parseCalls(out);
      expect(calls).toHaveLength(1);
      expect(names).toContain(calls[0]!.name);
    }
  });

  it('runs code on the example of the statement, not on hidden tests', async () => {
    const { statementExample } = await import('../../src/sim/policies/tasks.js');
    for (const r of code)
      expect(statementExample(r.problem as string), String(r.instance_id)).toBe((r.tests as Array<{ input: string }>)[0]!.input);
    expect(statementExample('no example here')).toBeUndefined();
  });

  it('leaves prompts it does not know (chat) to the filler', () => {
    expect(ask(policies, ctx(prompt([{ role: 'user', content: CHAT_USER_MESSAGE }]), 1))).toBeUndefined();
    expect(ask(policies, ctx('plain text without a chat template', 1))).toBeUndefined();
  });

  it('is identical for one seed and varies across a group', () => {
    const text = first(mathPrompt(math[10]!.problem as string));
    expect(ask(policies, ctx(text, 5))).toBe(ask(policies, ctx(text, 5)));
    const distinct = new Set(Array.from({ length: 16 }, (_, i) => ask(policies, ctx(text, seedOf('g', i)))));
    expect(distinct.size).toBeGreaterThan(1);
  });

  it('opens a think block when thinking is on', () => {
    const out = ask(policies, ctx(prompt(firstMessages('s', mathPrompt(math[0]!.problem as string)), true), 3))!;
    expect(out.startsWith('<think>\n')).toBe(true);
    expect(out).toContain('</think>\n\n');
  });

  it('uses the tool results: boxes the value Python printed and finishes with it', () => {
    const user = mathPrompt(math[0]!.problem as string);
    const turn1 = ask(policies, ctx(first(user), 11))!;
    const call = parseCalls(turn1)[0]!;
    const base: ChatMessage[] = [...firstMessages('system', user), { role: 'assistant', content: turn1 }];
    let messages = base;
    if (call.name === 'think') {
      messages = [
        ...messages,
        { role: 'tool', content: 'Your thought has been logged.' },
        {
          role: 'assistant',
          content: ask(policies, ctx(prompt([...messages, { role: 'tool', content: 'Your thought has been logged.' }]), 12))!,
        },
      ];
    }
    const last = parseCalls(messages[messages.length - 1]!.content)[0]!;
    expect(last.name).toBe('execute_ipython_cell');
    const final = ask(policies, ctx(prompt([...messages, { role: 'tool', content: '12345' }]), 13))!;
    expect(final).toContain('\\boxed{12345}');
    expect(parseCalls(final)[0]).toEqual({ name: 'finish', arguments: { answer: '12345' } });
  });

  it('recognises veRL-form rows by their prompt messages', () => {
    const row = readJsonl('math-verl.jsonl')[2]!;
    const msgs = firstMessages('system', 'unused', row.prompt as never);
    expect(ask(policies, ctx(prompt(msgs), 2))).toContain('<tool_call>');
  });

  it('reads veRL rows from Parquet', async () => {
    const rows = readJsonl('math-verl.jsonl').slice(0, 2);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-h4-pq-'));
    try {
      const file = path.join(dir, 'train.parquet');
      parquetWriteFile({
        filename: file,
        columnData: [
          { name: 'data_source', data: rows.map((r) => r.data_source as string), type: 'STRING' },
          { name: 'prompt', data: rows.map((r) => r.prompt) },
          { name: 'reward_model', data: rows.map((r) => r.reward_model) },
          { name: 'extra_info', data: rows.map((r) => r.extra_info) },
        ],
      });
      const fromParquet = await loadPolicies([file], { seed: 1 });
      expect(fromParquet.map((p) => p.name)).toEqual(['math']);
      expect(ask(fromParquet, ctx(prompt(firstMessages('s', 'x', rows[1]!.prompt as never)), 4))).toContain('<tool_call>');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the file and line of a bad JSONL row', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-h4-bad-'));
    try {
      fs.writeFileSync(path.join(dir, 'bad.jsonl'), '{"data_source":"math","problem":"q","answer":"1"}\nnot json\n');
      await expect(loadPolicies([path.join(dir, 'bad.jsonl')], { seed: 1 })).rejects.toThrow(/bad\.jsonl line 2 is not JSON/);
      await expect(loadPolicies([path.join(dir, 'absent.jsonl')], { seed: 1 })).rejects.toThrow(/cannot read .*absent\.jsonl/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('parses a transcript: first user, assistant calls, latest tool responses, thinking flag', () => {
    const text = prompt([
      { role: 'system', content: 's' },
      { role: 'user', content: 'U' },
      { role: 'assistant', content: '<tool_call>\n{"name": "think", "arguments": {"thought": "x"}}\n</tool_call>' },
      { role: 'tool', content: 'R1' },
      { role: 'tool', content: 'R2' },
    ]);
    const t = parseTranscript(text);
    expect(t.firstUser).toBe('U');
    expect(t.assistant.map((a) => a.calls[0]?.name)).toEqual(['think']);
    expect(t.toolResponses).toEqual(['R1', 'R2']);
    expect(t.thinking).toBe(false);
    expect(parseCalls('<tool_call>{bad json</tool_call>')).toEqual([]);
  });
});

describe('per-instance success probability', () => {
  it('is a seeded Beta draw: some instances never solved, some always, most mixed', () => {
    const ps = Array.from({ length: 2000 }, (_, i) => successProbability(seedOf('p', i), DEFAULT_ALPHA, DEFAULT_BETA));
    expect(successProbability(seedOf('p', 3), DEFAULT_ALPHA, DEFAULT_BETA)).toBe(ps[3]);
    // A U-shaped Beta puts more mass at the ends.
    const u = Array.from({ length: 2000 }, (_, i) => successProbability(seedOf('p', i), 0.5, 0.5));
    expect(u.filter((p) => p === 0).length).toBeGreaterThan(ps.filter((p) => p === 0).length);
    const never = ps.filter((p) => p === 0).length / ps.length;
    const always = ps.filter((p) => p === 1).length / ps.length;
    expect(never).toBeGreaterThan(0.05);
    expect(never).toBeLessThan(0.12);
    expect(always).toBeGreaterThan(0.05);
    expect(always).toBeLessThan(0.12);
    expect(1 - never - always).toBeGreaterThan(0.75);
    const mean = ps.reduce((a, b) => a + b, 0) / ps.length;
    expect(mean).toBeGreaterThan(0.4);
    expect(mean).toBeLessThan(0.6);
  });

  it('decides right with probability p, rising by boostPerUpdate per weight update', () => {
    const rows = toTaskRows(readJsonl('math.jsonl').slice(0, 1), { seed: 0, alpha: 1, beta: 1 }) as TaskRow[];
    const right = rows[0]!.instance as { answer: string };
    const rate = (p: number, updates: number) => {
      const [policy] = policiesFor([{ ...rows[0]!, p }]);
      const text = prompt(firstMessages('s', mathPrompt((rows[0]!.instance as { problem: string }).problem)));
      const follow = new Map<string, string>();
      let ok = 0;
      const n = 400;
      for (let i = 0; i < n; i++) {
        let out = policy!.respond(ctx(text, seedOf('r', i), { updates, boostPerUpdate: 0.05 }))!.text;
        let call = parseCalls(out)[0]!;
        if (call.name === 'think') {
          const key = out;
          if (!follow.has(key))
            follow.set(
              key,
              prompt([
                ...firstMessages('s', mathPrompt((rows[0]!.instance as { problem: string }).problem)),
                { role: 'assistant', content: out },
                { role: 'tool', content: 'ok' },
              ]),
            );
          out = policy!.respond(ctx(follow.get(key)!, seedOf('r2', i), { updates, boostPerUpdate: 0.05 }))!.text;
          call = parseCalls(out)[0]!;
        }
        if ((call.arguments.code as string).includes(JSON.stringify(right.answer))) ok++;
      }
      return ok / n;
    };
    expect(rate(0, 0)).toBe(0);
    expect(rate(0, 10)).toBe(0); // never-solved instances stay unsolved
    expect(rate(1, 0)).toBe(1);
    const base = rate(0.3, 0);
    const boosted = rate(0.3, 6);
    expect(base).toBeGreaterThan(0.2);
    expect(base).toBeLessThan(0.4);
    expect(boosted).toBeGreaterThan(base + 0.15);
  });
});
