import { RaasError } from '../../../protocol/errors.js';
import { CodeInstance, aliasesOf } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { AgentHandler, StageContext } from '../types.js';
import { configNumber, firstMessages, runToolAgent, taskSchema } from '../common/run.js';
import { runHiddenTests } from './tests.js';
import { agentOomReason, firstFilter, limitReason } from '../common/filter.js';

/** Where the model writes its program (inside the sandbox's workspace). */
const SOLUTION_FILE = 'solution.py';

const SYSTEM = [
  'You are an expert Python programmer working in a sandbox whose workspace is /workspace.',
  'Tools: execute_bash runs shell commands, str_replace_editor creates and edits files, execute_ipython_cell runs Python.',
  `Write a complete Python 3 program to /workspace/${SOLUTION_FILE} that reads standard input and writes standard output, test it, then call finish.`,
].join(' ');

/** The user message: the statement and where the program goes. */
export function codePrompt(problem: string): string {
  return `${problem}\n\nSave your program as /workspace/${SOLUTION_FILE}. It is run with python3 on hidden tests (stdin → stdout).`;
}

/**
 * Built-in `code` handler (ProRL's `deepcoder`): the model writes /workspace/solution.py with bash,
 * editor and python tools; EVAL runs every hidden stdin/stdout test in a fresh sandbox under a time
 * limit. Reward `all_or_nothing` (default) or `fraction` (`handlers.code.reward`).
 */
export const codeHandler: AgentHandler<CodeInstance> = {
  name: 'code',
  aliases: aliasesOf('code'),
  instance: taskSchema(CodeInstance),
  async init(ctx) {
    const runtime = await ctx.sandboxes.open({ network: false }, ctx.signal);
    return { runtime };
  },
  async run(ctx) {
    const inst = ctx.job.instance;
    const { trajectory, run } = await runToolAgent(ctx, {
      messages: firstMessages(SYSTEM, codePrompt(inst.problem), inst.prompt_messages),
      tools: ['execute_bash', 'str_replace_editor', 'execute_ipython_cell', 'think', 'finish'],
      defaults: { max_iterations: 20 },
      nudge: 'Continue with the tools: write /workspace/solution.py, test it, then call finish.',
    });
    try {
      const solution = (await readSolution(ctx.runtime, ctx.signal)) ?? lastPythonBlock(trajectory.last_text);
      run.artifacts.solution = solution ?? null;
    } catch (err) {
      // Over sandbox.max_read_bytes: the job ends with that error in EVAL, keeping the trajectory.
      if (!(err instanceof RaasError) || err.code !== 'sandbox_limit') throw err;
      run.artifacts.solution = null;
      run.artifacts.solution_error = err.message;
    }
    return run;
  },
  async eval(ctx) {
    const limit = ctx.run.artifacts.solution_error;
    if (typeof limit === 'string')
      throw new RaasError('sandbox_limit', `code: /workspace/${SOLUTION_FILE} was not graded: ${limit}`, { retryable: false });
    const code = ctx.run.artifacts.solution;
    if (typeof code !== 'string' || code.trim() === '')
      return { reward: 0, resolved: false, details: { reason: `no /workspace/${SOLUTION_FILE} was written` } };
    const mode = ctx.config.reward === 'fraction' ? 'fraction' : 'all_or_nothing';
    const r = await runHiddenTests(ctx as StageContext<CodeInstance>, code, {
      timeLimitS: ctx.job.instance.time_limit_s,
      stopAtFirstFailure: mode === 'all_or_nothing',
      concurrency: configNumber(ctx.config, 'test_concurrency', 2),
      python: typeof ctx.config.python === 'string' ? ctx.config.python : 'python3',
    });
    const reward = mode === 'fraction' ? r.passed / r.total : r.passed === r.total ? 1 : 0;
    const resolved = r.passed === r.total;
    const filter = firstFilter(ctx.config, agentOomReason(ctx.run), limitReason(ctx.run, resolved));
    return {
      reward,
      resolved,
      details: { passed: r.passed, total: r.total, reward_mode: mode, tests: r.results },
      ...(filter ? { filter_reason: filter } : {}),
    };
  },
};

/**
 * Reads solution.py through the sandbox (as the sandbox user, capped at sandbox.max_read_bytes): a
 * symlink the model planted resolves inside the sandbox, a FIFO or device is refused. No file (or
 * not a regular file) is no solution; a file over the cap throws `sandbox_limit`.
 */
async function readSolution(sb: Sandbox | undefined, signal: AbortSignal): Promise<string | undefined> {
  if (!sb) return undefined;
  try {
    return (await sb.readFile(SOLUTION_FILE, { signal })).toString('utf8');
  } catch (err) {
    if (signal.aborted || (err instanceof RaasError && err.code === 'sandbox_limit')) throw err;
    return undefined;
  }
}

/** How much of a message the fenced-block extraction reads: its last MAX_SCAN_CHARS characters. */
export const MAX_SCAN_CHARS = 1 << 20;

/** The last ```python fenced block of a text (for models that answer in prose instead of a file). */
export function lastPythonBlock(text: string): string | undefined {
  return scanLastPythonBlock(text).value;
}

/**
 * lastPythonBlock with the characters it searched (`steps`): the blocks of
 * `/```(?:python|py)?\n([\s\S]*?)```/g`, found left to right without backtracking. An opening
 * fence whose block never closes ends the search (no later fence can close either), so a text of
 * unclosed fences costs one pass instead of one scan to its end per fence.
 */
export function scanLastPythonBlock(full: string): { value: string | undefined; steps: number } {
  const text = full.length > MAX_SCAN_CHARS ? full.slice(-MAX_SCAN_CHARS) : full;
  let steps = 0;
  let last: string | undefined;
  let from = 0;
  for (;;) {
    const open = text.indexOf('```', from);
    steps += (open < 0 ? text.length : open) - from + 1;
    if (open < 0) break;
    const header = ['python\n', 'py\n', '\n'].find((h) => text.startsWith(h, open + 3));
    if (header === undefined) {
      from = open + 1;
      continue;
    }
    const body = open + 3 + header.length;
    const end = text.indexOf('```', body);
    steps += (end < 0 ? text.length : end) - body + 1;
    if (end < 0) break;
    last = text.slice(body, end);
    from = end + 3;
  }
  return { value: last, steps };
}

/** @public The module form of the built-in handler (a `handlers.<name>.module` path can point at it). */
export default codeHandler;
