import { describe, expect, it } from 'vitest';
import { HandlerRegistry } from '../../src/server/handlers/registry.js';
import { mathHandler } from '../../src/server/handlers/math/index.js';
import { codeHandler } from '../../src/server/handlers/code/index.js';
import { sweHandler } from '../../src/server/handlers/swe/index.js';
import { normaliseRow, taskOf } from '../../src/protocol/tasks.js';
import { readJsonl } from './helpers.js';

type Issues = Array<{ message: string; path?: PropertyKey[] }>;
async function validate(
  schema: { '~standard': { validate(v: unknown): unknown } },
  row: unknown,
): Promise<{ value?: any; issues?: Issues }> {
  return (await schema['~standard'].validate(row)) as { value?: any; issues?: Issues };
}

describe('instances: plain and veRL row forms', () => {
  it('accepts every row of the datasets in plain form', async () => {
    for (const [file, h] of [
      ['math.jsonl', mathHandler],
      ['code.jsonl', codeHandler],
      ['swe.jsonl', sweHandler],
    ] as const) {
      for (const row of readJsonl(file)) expect((await validate(h.instance, row)).issues, `${file} ${row.instance_id}`).toBeUndefined();
    }
  });

  it('normalises veRL math rows (DeepScaleR): prompt messages kept, ground truth as answer, index as instance_id', async () => {
    const row = readJsonl('math-verl.jsonl')[0]!;
    const { value, issues } = await validate(mathHandler.instance, row);
    expect(issues).toBeUndefined();
    const plain = readJsonl('math.jsonl')[0]!;
    expect(value.answer).toBe(plain.answer);
    expect(value.instance_id).toBe(plain.instance_id);
    expect(value.problem).toContain(plain.problem as string);
    expect(value.prompt_messages).toEqual(row.prompt as unknown[]);
    expect(value.reward_model).toBeUndefined();
  });

  it('normalises veRL code rows (DeepCoder): prompt and tests given as JSON strings', async () => {
    const row = readJsonl('code-verl.jsonl')[0]!;
    expect(typeof row.prompt).toBe('string');
    const { value, issues } = await validate(codeHandler.instance, row);
    expect(issues).toBeUndefined();
    const plain = readJsonl('code.jsonl')[0]!;
    expect(value.tests).toEqual((plain.tests as object[]).map((t) => ({ ...t, testtype: 'stdin' })));
    expect(value.problem).toBe(plain.problem);
    expect(value.time_limit_s).toBe(5);
  });

  it('reads APPS/TACO test lists ({inputs, outputs}) and numeric answers', async () => {
    const code = await validate(codeHandler.instance, {
      data_source: 'taco',
      prompt: [{ role: 'user', content: 'Echo.' }],
      reward_model: { ground_truth: JSON.stringify({ inputs: ['1\n', '2\n'], outputs: ['1\n', '2\n'] }) },
    });
    expect(code.issues).toBeUndefined();
    expect(code.value.tests).toEqual([
      { input: '1\n', output: '1\n' },
      { input: '2\n', output: '2\n' },
    ]);
    const functional = await validate(codeHandler.instance, {
      data_source: 'deepcoder',
      prompt: [{ role: 'user', content: 'f' }],
      reward_model: { ground_truth: JSON.stringify([{ input: '[1]', output: '1', testtype: 'functional' }]) },
    });
    expect(functional.issues?.[0]?.message).toMatch(/only stdin\/stdout tests/);
    const math = await validate(mathHandler.instance, {
      data_source: 'openai/gsm8k',
      prompt: [{ role: 'user', content: 'How many?' }],
      reward_model: { ground_truth: 18 },
    });
    expect(math.value.answer).toBe('18');
  });

  it('parses SWE-bench style JSON-string test lists', async () => {
    const row = { ...readJsonl('swe.jsonl')[0]! };
    row.FAIL_TO_PASS = JSON.stringify(row.FAIL_TO_PASS);
    row.PASS_TO_PASS = JSON.stringify(row.PASS_TO_PASS);
    const { value, issues } = await validate(sweHandler.instance, row);
    expect(issues).toBeUndefined();
    expect(Array.isArray(value.FAIL_TO_PASS)).toBe(true);
    expect(value.test_command).toBe('python3 -m unittest');
  });

  it('names the missing or wrong field', async () => {
    const cases: Array<[typeof mathHandler.instance, unknown, string]> = [
      [mathHandler.instance, { data_source: 'math', problem: 'What is 1+1?' }, 'answer'],
      [mathHandler.instance, { data_source: 'math', answer: '2' }, 'problem'],
      [codeHandler.instance, { data_source: 'code', problem: 'x', tests: [] }, 'tests'],
      [codeHandler.instance, { data_source: 'code', problem: 'x', tests: [{ input: 1 }] }, 'tests'],
      [sweHandler.instance, { data_source: 'swe', problem_statement: 'bug', FAIL_TO_PASS: ['t'] }, 'files'],
      [sweHandler.instance, { data_source: 'swe', problem_statement: 'bug', files: { 'a.py': '' }, FAIL_TO_PASS: [] }, 'FAIL_TO_PASS'],
    ];
    for (const [schema, row, field] of cases) {
      const { issues } = await validate(schema as any, row);
      expect(issues?.length, JSON.stringify(row)).toBeGreaterThan(0);
      expect(String(issues![0]!.path?.[0]), JSON.stringify(issues)).toBe(field);
    }
    const { issues } = await validate(mathHandler.instance as any, { data_source: 'math', problem: 'q' });
    expect(issues![0]!.message).toMatch(/instance\.answer is required/);
    // Present with the wrong type is not "required".
    const wrong: Array<[typeof mathHandler.instance, unknown, string]> = [
      [
        codeHandler.instance,
        { data_source: 'code', problem: 'x', tests: 'none' },
        'wrong type: expected a list of {input, output}, got "none"',
      ],
      [
        codeHandler.instance,
        { data_source: 'code', problem: 7, tests: [{ input: '', output: '' }] },
        'wrong type: expected a string, got 7',
      ],
      [
        mathHandler.instance,
        { data_source: 'math', problem: 'q', answer: { value: 2 } },
        'wrong type: expected a string or a number, got {"value":2}',
      ],
      [
        sweHandler.instance,
        { data_source: 'swe', problem_statement: ['bug'], files: {}, FAIL_TO_PASS: ['t'] },
        'wrong type: expected a string, got ["bug"]',
      ],
    ];
    for (const [schema, row, message] of wrong) {
      const r = await validate(schema as any, row);
      expect(r.issues?.[0]?.message, JSON.stringify(row)).toBe(message);
    }
  });

  it('turns a Parquet INT64 index (BigInt) into a number id', async () => {
    const { value } = await validate(mathHandler.instance, {
      data_source: 'deepscaler',
      prompt: [{ role: 'user', content: 'q' }],
      reward_model: { ground_truth: '1' },
      extra_info: { index: 12n },
    });
    expect(value.instance_id).toBe(12);
  });

  it('leaves unparsable JSON strings for the schema to reject', () => {
    expect((normaliseRow({ data_source: 'code', tests: '[not json' }) as { tests: unknown }).tests).toBe('[not json');
    expect(normaliseRow('x')).toBe('x');
  });

  it('maps ProRL and veRL data-source names onto the handlers', () => {
    const reg = new HandlerRegistry();
    expect(reg.resolve('deepscaler')?.name).toBe('math');
    expect(reg.resolve('deepcoder')?.name).toBe('code');
    expect(reg.resolve('openai/gsm8k')?.name).toBe('math');
    expect(reg.resolve('swe')?.name).toBe('swe');
    expect(reg.names()).toEqual(expect.arrayContaining(['chat', 'code', 'math', 'swe']));
    expect(taskOf('DeepScaleR'.toLowerCase())).toBe('math');
    expect(taskOf('chat')).toBeUndefined();
  });
});
