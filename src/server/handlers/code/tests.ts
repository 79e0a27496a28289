import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pLimit from 'p-limit';
import type { CodeInstance, CodeTest } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { StageContext } from '../types.js';

/** The verdict of one hidden test (inputs and outputs are not echoed: they stay hidden). */
export interface TestVerdict {
  index: number;
  status: 'passed' | 'wrong_answer' | 'runtime_error' | 'time_limit' | 'skipped';
  exit_code?: number | null;
}

/** Compares program output with the expected output, ignoring trailing spaces and trailing blank lines. */
export function outputsMatch(actual: string, expected: string): boolean {
  const norm = (s: string) => s.replace(/\r\n/g, '\n').split('\n').map((l) => l.trimEnd()).join('\n').trim();
  return norm(actual) === norm(expected);
}

/**
 * Runs each hidden test in a fresh sandbox (`timeout` limits the program; the sandbox call has a
 * margin on top). Reads the output file from the host side so nothing passes through the terminal.
 */
export async function runHiddenTests(
  ctx: StageContext<CodeInstance>,
  code: string,
  opts: { timeLimitS: number; stopAtFirstFailure: boolean; concurrency: number; python: string },
): Promise<{ passed: number; total: number; results: TestVerdict[] }> {
  const tests = ctx.job.instance.tests;
  const results: TestVerdict[] = tests.map((_, index) => ({ index, status: 'skipped' }));
  let failed = false;
  const limit = pLimit(Math.max(1, Math.floor(opts.concurrency)));
  await Promise.all(
    tests.map((t, i) =>
      limit(async () => {
        if (failed && opts.stopAtFirstFailure) return;
        ctx.signal.throwIfAborted();
        results[i] = await runOne(ctx, code, t, i, opts);
        if (results[i]!.status !== 'passed') failed = true;
      }),
    ),
  );
  return { passed: results.filter((r) => r.status === 'passed').length, total: tests.length, results };
}

async function runOne(ctx: StageContext<CodeInstance>, code: string, test: CodeTest, index: number, opts: { timeLimitS: number; python: string }): Promise<TestVerdict> {
  const sb = await ctx.sandboxes.open({ files: { 'solution.py': code, 'input.txt': test.input }, tools: ['bash'], network: false }, ctx.signal);
  try {
    const limit = opts.timeLimitS;
    const cmd = `timeout -k 1 ${limit} ${opts.python} solution.py < input.txt > output.txt 2> stderr.txt; echo "exit=$?"`;
    const r = await sb.bash(cmd, { timeout_s: limit + 10, signal: ctx.signal });
    const m = /exit=(\d+)/.exec(r.output);
    const exit = m ? Number(m[1]) : null;
    if (r.timed_out || exit === 124 || exit === 137) return { index, status: 'time_limit', exit_code: exit };
    if (exit !== 0) return { index, status: 'runtime_error', exit_code: exit };
    const out = await readOutput(sb.workspace, sb, ctx.signal);
    return { index, status: outputsMatch(out, test.output) ? 'passed' : 'wrong_answer', exit_code: 0 };
  } finally {
    await sb.close();
  }
}

async function readOutput(workspace: string, sb: Sandbox, signal: AbortSignal): Promise<string> {
  try {
    return await readFile(path.join(workspace, 'output.txt'), { encoding: 'utf8', signal });
  } catch {
    return (await sb.bash('cat output.txt', { signal })).output;
  }
}
