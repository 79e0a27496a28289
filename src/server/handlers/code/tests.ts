import pLimit from 'p-limit';
import type { CodeInstance, CodeTest } from '../../../protocol/tasks.js';
import type { StageContext } from '../types.js';

/** The verdict of one hidden test (inputs and outputs are not echoed: they stay hidden). */
export interface TestVerdict {
  index: number;
  status: 'passed' | 'wrong_answer' | 'runtime_error' | 'time_limit' | 'skipped';
  exit_code?: number | null;
}

/** Compares program output with the expected output, ignoring trailing spaces and trailing blank lines. */
export function outputsMatch(actual: string, expected: string): boolean {
  const norm = (s: string) =>
    s
      .replace(/\r\n/g, '\n')
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n')
      .trim();
  return norm(actual) === norm(expected);
}

/**
 * Runs each hidden test in a fresh sandbox: the program is a fresh process started by the tool
 * server (never the agent's shell, whose functions and aliases could fake an exit status), its
 * stdout captured by the tool server, the exit status taken from the process. `timeout` limits
 * the program; the call has a margin on top.
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

/** Output kept of one run: enough to compare with the expected output, bounded for a program that floods stdout. */
function outputCap(expected: string): number {
  return Math.max(1 << 20, 2 * Buffer.byteLength(expected) + 4096);
}

async function runOne(
  ctx: StageContext<CodeInstance>,
  code: string,
  test: CodeTest,
  index: number,
  opts: { timeLimitS: number; python: string },
): Promise<TestVerdict> {
  // The input goes in as a file (any size; exec's stdin is bounded by sandbox.max_input_bytes) and
  // reaches the program through a redirect by a fresh bash that then becomes `timeout` (exec).
  const sb = await ctx.sandboxes.open({ files: { 'solution.py': code, 'input.txt': test.input }, tools: [], network: false }, ctx.signal);
  try {
    const limit = opts.timeLimitS;
    const r = await sb.exec(
      ['bash', '--noprofile', '--norc', '-c', 'exec timeout -k 1 "$1" "$2" solution.py < input.txt', 'raas', String(limit), opts.python],
      {
        timeout_s: limit + 10,
        maxOutputBytes: outputCap(test.output),
        signal: ctx.signal,
      },
    );
    const exit = r.exit_code;
    if (r.timed_out || exit === 124 || exit === 137) return { index, status: 'time_limit', exit_code: exit };
    if (exit !== 0) return { index, status: 'runtime_error', exit_code: exit };
    return { index, status: !r.truncated && outputsMatch(r.stdout, test.output) ? 'passed' : 'wrong_answer', exit_code: 0 };
  } finally {
    await sb.close();
  }
}
