import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPolicies } from '../../src/sim/policies/index.js';
import { tableProgram } from '../../src/sim/policies/tasks.js';
import { parseCalls } from '../../src/sim/policies/transcript.js';
import type { PolicyContext, SimPolicy } from '../../src/sim/policy.js';
import { startSim } from '../../src/sim/index.js';
import { codePrompt } from '../../src/server/handlers/code/index.js';
import { firstMessages } from '../../src/server/handlers/common/run.js';
import { toolDefinitions } from '../../src/server/handlers/common/tools.js';
import { qwen3Tokenizer, type ChatMessage } from '../../src/tokens/index.js';
import { rng } from '../../src/util/hash.js';
import { DATA, readJsonl } from '../handlers/helpers.js';

// The simulator plays any task: rows of a custom data_source through a task script (a `sim` field
// of the row, or a `policies` module), and every bundled row with a plan it can win with.
const tok = qwen3Tokenizer();
const TOOLS = toolDefinitions(['execute_bash', 'str_replace_editor', 'finish']);
const dir = mkdtempSync(path.join(tmpdir(), 'raas-sim-custom-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const render = (messages: ChatMessage[]): string => tok.decode(tok.renderPrompt(messages, { tools: TOOLS, enableThinking: false }));
/** A context whose pass rate is `p` for every instance (the simulator's `difficulty: {model: fixed}`). */
const ctx = (promptText: string, p: number, seed = 1): PolicyContext => ({
  promptText,
  promptIds: [],
  rng: rng(seed),
  weightVersion: '0',
  updates: 0,
  boostPerUpdate: 0,
  passRate: () => p,
});
const ask = (policies: SimPolicy[], c: PolicyContext): string | undefined => {
  for (const pol of policies) {
    const t = pol.respond(c);
    if (t) return t.text;
  }
  return undefined;
};
function jsonl(name: string, rows: unknown[]): string {
  const f = path.join(dir, name);
  writeFileSync(f, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return f;
}
const python = (source: string, input: string): string =>
  spawnSync('python3', ['-c', source], { input, encoding: 'utf8', timeout: 20_000 }).stdout;

describe('bundled rows: a row and its veRL copy are played from the row that has the reference', () => {
  it('raas sim-llm with every bundled file plays code-sum-pairs with its reference solution', async () => {
    const files = readdirSync(DATA)
      .filter((f) => f.endsWith('.jsonl'))
      .sort()
      .map((f) => path.join(DATA, f));
    // code-verl.jsonl sorts first and has the same problem text without reference_solution.
    expect(files.map((f) => path.basename(f))[0]).toBe('code-verl.jsonl');
    const policies = await loadPolicies(files, { seed: 3 });
    const row = readJsonl('code.jsonl').find((r) => r.instance_id === 'code-sum-pairs')!;
    const out = ask(policies, ctx(render(firstMessages('sys', codePrompt(row.problem as string))), 1))!;
    const created = parseCalls(out).find((c) => c.name === 'str_replace_editor');
    expect(created?.arguments.file_text).toBe(row.reference_solution);
  });

  it('a code row without reference solution (DeepCoder rows) gets a program that answers its tests', async () => {
    const tests = [
      { input: '2\n1 2\n10 -3\n', output: '3\n7\n' },
      { input: '1\n0 0\n', output: '0\n' },
    ];
    const f = jsonl('deepcoder.jsonl', [
      {
        data_source: 'deepcoder',
        prompt: [{ role: 'user', content: 'Sum each pair of integers, one pair per line.' }],
        reward_model: { ground_truth: JSON.stringify(tests) },
        extra_info: { index: 'dc-1' },
      },
    ]);
    const policies = await loadPolicies([f], { seed: 0 });
    const text = render(firstMessages('sys', codePrompt('Sum each pair of integers, one pair per line.')));
    const right = parseCalls(ask(policies, ctx(text, 1))!).find((c) => c.name === 'str_replace_editor')!.arguments.file_text as string;
    const wrong = parseCalls(ask(policies, ctx(text, 0))!).find((c) => c.name === 'str_replace_editor')!.arguments.file_text as string;
    expect(right).toBe(tableProgram(tests));
    for (const t of tests) expect(python(right, t.input)).toBe(t.output);
    expect(python(wrong, tests[0]!.input)).not.toBe(tests[0]!.output);
    expect(python(wrong, tests[1]!.input)).toBe(tests[1]!.output);
  });
});

describe('custom data sources', () => {
  const row = (id: string, content: string, extra: Record<string, unknown> = {}) => ({
    data_source: 'write_file',
    instance_id: id,
    path: `${id}.txt`,
    content,
    ...extra,
  });
  const prompt = (id: string, content: string) =>
    render(firstMessages('sys', `Create /workspace/${id}.txt whose content is exactly:\n${content}`));
  const create = (id: string, text: string) => ({
    say: 'Creating the file.',
    name: 'str_replace_editor',
    arguments: { command: 'create', path: `/workspace/${id}.txt`, file_text: text },
  });

  it("a row's own sim field: right or wrong by the pass rate, step by step, a call-less step as plain text", async () => {
    const f = jsonl('own.jsonl', [
      row('a', 'alpha', {
        sim: {
          match: 'Create /workspace/a.txt whose content',
          right: [create('a', 'alpha'), { say: 'Done.', name: 'finish', arguments: {} }],
          wrong: [create('a', 'alpah'), { say: 'I am not sure it is right.' }],
        },
      }),
      // No match: the row's problem is the text that finds it.
      row('b', 'beta', { problem: 'Create /workspace/b.txt whose content', sim: { right: [create('b', 'beta')] } }),
    ]);
    const policies = await loadPolicies([f], { seed: 0 });
    expect(policies.map((p) => p.name)).toEqual(['custom']);
    const first = ask(policies, ctx(prompt('a', 'alpha'), 1))!;
    expect(parseCalls(first)).toEqual([create('a', 'alpha')].map(({ name, arguments: a }) => ({ name, arguments: a })));
    expect(first.startsWith('Creating the file.\n<tool_call>')).toBe(true);
    // The next turn follows the transcript: the same plan, its second step.
    const turn2 = render([
      ...firstMessages('sys', `Create /workspace/a.txt whose content is exactly:\nalpha`),
      { role: 'assistant', content: first },
      { role: 'tool', content: 'File created.' },
    ]);
    expect(parseCalls(ask(policies, ctx(turn2, 1))!)).toEqual([{ name: 'finish', arguments: {} }]);
    const wrongFirst = ask(policies, ctx(prompt('a', 'alpha'), 0))!;
    expect(parseCalls(wrongFirst)[0]!.arguments.file_text).toBe('alpah');
    const wrong2 = render([
      ...firstMessages('sys', `Create /workspace/a.txt whose content is exactly:\nalpha`),
      { role: 'assistant', content: wrongFirst },
      { role: 'tool', content: 'File created.' },
    ]);
    expect(ask(policies, ctx(wrong2, 0))).toBe('I am not sure it is right.');
    expect(parseCalls(ask(policies, ctx(prompt('b', 'beta'), 1))!)[0]!.arguments.file_text).toBe('beta');
    // A prompt no row matches is not this policy's.
    expect(ask(policies, ctx(prompt('c', 'gamma'), 1))).toBeUndefined();
  });

  it('a policies module scripts every row of its data_source; startSim answers with it over HTTP', async () => {
    const data = jsonl('mod.jsonl', [row('m1', 'one'), row('m2', 'two'), { data_source: 'other', x: 1 }]);
    const mod = path.join(dir, 'write-file.sim.mjs');
    writeFileSync(
      mod,
      `export default {
  data_source: ['write_file', 'touch'],
  match: (row) => \`Create /workspace/\${row.path} whose content is exactly:\\n\${row.content}\`,
  right: (row) => [{ name: 'str_replace_editor', arguments: { command: 'create', path: \`/workspace/\${row.path}\`, file_text: row.content } }, { name: 'finish', arguments: {} }],
};\n`,
    );
    const sim = await startSim({ datasets: [data], policies: [mod], difficulty: { model: 'fixed', pass_rate: 1 } });
    try {
      const ids = tok.renderPrompt(firstMessages('sys', 'Create /workspace/m2.txt whose content is exactly:\ntwo'), {
        tools: TOOLS,
        enableThinking: false,
      });
      const res = await fetch(`${sim.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: sim.config.model, prompt: ids, max_tokens: 512, seed: 1 }),
      });
      const text = ((await res.json()) as { choices: Array<{ text: string }> }).choices[0]!.text;
      expect(parseCalls(text)).toEqual([
        { name: 'str_replace_editor', arguments: { command: 'create', path: '/workspace/m2.txt', file_text: 'two' } },
      ]);
    } finally {
      await sim.close();
    }
  });

  it('a bad script is refused at start, naming the row or the module and the fix', async () => {
    const bad = jsonl('bad.jsonl', [row('x', 'y', { sim: { right: [{ name: 'finish', argument: {} }] } })]);
    await expect(loadPolicies([bad], { seed: 0 })).rejects.toThrow(/bad\.jsonl line 1: sim\.right\.0: Unrecognized key: "argument"/);
    const nomatch = jsonl('nomatch.jsonl', [row('x', 'y', { sim: { right: [{ name: 'finish' }] } })]);
    await expect(loadPolicies([nomatch], { seed: 0 })).rejects.toThrow(
      /nomatch\.jsonl line 1: sim\.match is required when the row has no problem/,
    );
    const mod = path.join(dir, 'not-a-script.mjs');
    writeFileSync(mod, 'export default { data_source: "write_file" };\n');
    await expect(startSim({ policies: [mod] })).rejects.toThrow(/not-a-script\.mjs: the default export must be a task script/);
    await expect(startSim({ policies: [path.join(dir, 'absent.mjs')] })).rejects.toThrow(/sim policies: cannot load .*absent\.mjs/);
  });
});
