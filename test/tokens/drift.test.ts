import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auditDriftFile, formatDriftReport } from '../../src/tokens/audit-cli.js';
import { modelTurns, qwen3Tokenizer } from '../../src/tokens/index.js';

const tok = qwen3Tokenizer();
const dir = mkdtempSync(path.join(os.tmpdir(), 'raas-drift-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A result line whose model turns are the given id lists, separated by a 2-id observation. */
function result(job: string, turns: number[][]): Record<string, unknown> {
  const response_ids: number[] = [];
  const response_mask: number[] = [];
  turns.forEach((ids, k) => {
    if (k > 0) {
      response_ids.push(198, 151644);
      response_mask.push(0, 0);
    }
    response_ids.push(...ids);
    response_mask.push(...ids.map(() => 1));
  });
  return { job_id: job, tokens: { prompt_ids: [1, 2], response_ids, response_mask, logprobs: response_ids.map(() => 0) } };
}

describe('raas audit-drift', () => {
  const clean = tok.encode('Hello, my dog is cute');
  // The drift examples of wire-formats.md: "\n","\n" -> "\n\n"; "h","ello" -> "hello"; a split emoji.
  const lines = [
    result('clean', [
      [...clean, 151645],
      [...clean, 151645],
    ]),
    result('newlines', [[...clean, 198, 198, 151645]]),
    result('hello', [clean, [71, 4791, 151645]]),
    result('emoji', [[9284, 151645]]),
    { groups: [{ rollouts: [result('in-batch', [[71, 4791]])] }] },
    'not json',
  ];
  const file = path.join(dir, 'results.jsonl');
  writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n'));

  it('splits model turns on the mask', () => {
    expect(modelTurns({ id: 'x', response_ids: [1, 2, 3, 4, 5], response_mask: [1, 1, 0, 1, 0] })).toEqual([[1, 2], [4]]);
  });

  it('counts the trajectories, turns and tokens a text round trip would change, with examples', async () => {
    const r = await auditDriftFile(file, { examples: 10 });
    expect(r.trajectories).toBe(5);
    expect(r.trajectories_changed).toBe(4);
    expect(r.model_turns).toBe(7);
    expect(r.turns_changed).toBe(4);
    expect(r.tokens_changed).toBe(2 + 2 + 1 + 2);
    expect(r.skipped).toBe(1);
    expect(r.examples.find((e) => e.trajectory === 'newlines')).toMatchObject({ generated: [198, 198], reencoded: [271] });
    expect(r.examples.find((e) => e.trajectory === 'hello')).toMatchObject({ turn: 1, generated: [71, 4791], reencoded: [14990] });
    expect(formatDriftReport(r)).toMatch(/trajectories: 5 \(4 would change/);
  });

  it('names a missing file', async () => {
    await expect(auditDriftFile(path.join(dir, 'missing.jsonl'))).rejects.toThrow(/cannot read .*missing\.jsonl/);
  });

  it('runs as a CLI command on the built package', () => {
    const out = spawnSync(process.execPath, [path.resolve('dist/src/cli.js'), 'audit-drift', file, '--json'], { encoding: 'utf8' });
    expect(out.status).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ trajectories: 5, trajectories_changed: 4 });
  }, 60_000);
});
