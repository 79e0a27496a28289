import type { PolicyContext, PolicyTurn, SimPolicy } from '../policy.js';
import { mutateProgram } from './mutate.js';
import type { TaskRow } from './rows.js';
import { statementExample } from './tasks.js';
import { parseTranscript, renderCall, type PolicyCall } from './transcript.js';

/**
 * How one agent harness names the two actions a scripted rollout needs: write a file and run a
 * command. Read from each harness's own tool definitions in the requests it sends (the names and
 * argument names a model must use to drive it).
 */
export interface HarnessToolSchema {
  readonly name: string;
  /** Tool names that, all listed in a prompt's tools, identify the harness. */
  readonly detect: readonly string[];
  write(path: string, content: string): PolicyCall;
  run(command: string): PolicyCall;
}

/** Schemas of the harnesses raas has run (docs/agent-gateway.md); a test may pass its own. */
const HARNESS_SCHEMAS: readonly HarnessToolSchema[] = [
  {
    // @qwen-code/qwen-code 0.24.4: write_file {file_path, content}, run_shell_command {command, description}.
    name: 'qwen-code',
    detect: ['run_shell_command', 'write_file'],
    write: (file_path, content) => ({ name: 'write_file', arguments: { file_path, content } }),
    run: (command) => ({ name: 'run_shell_command', arguments: { command, description: 'Run the command' } }),
  },
  {
    // examples/harness/mini_agent.py (docs/tasks.md, "Bring your own agent"): run {command}, write_file {path, content}.
    name: 'mini-agent',
    detect: ['run', 'write_file'],
    write: (p, content) => ({ name: 'write_file', arguments: { path: p, content } }),
    run: (command) => ({ name: 'run', arguments: { command } }),
  },
  {
    // @openai/codex 0.171.0 (Responses API): exec_command {cmd}; a file is written with a heredoc.
    name: 'codex',
    detect: ['exec_command', 'write_stdin'],
    write: (p, content) => ({
      name: 'exec_command',
      arguments: { cmd: `cat > ${p} <<'RAAS_EOF'\n${content.endsWith('\n') ? content : `${content}\n`}RAAS_EOF` },
    }),
    run: (cmd) => ({ name: 'exec_command', arguments: { cmd } }),
  },
  {
    // @anthropic-ai/claude-code: Write {file_path, content}, Bash {command, description}.
    name: 'claude-code',
    detect: ['Bash', 'Write'],
    write: (file_path, content) => ({ name: 'Write', arguments: { file_path, content } }),
    run: (command) => ({ name: 'Bash', arguments: { command, description: 'Run the command' } }),
  },
];

const WS = '/workspace';
/** The first turn's opening words: which one tells later turns whether this rollout is the right one. */
const RIGHT_OPENING = 'Sure.';
const WRONG_OPENING = 'Okay.';

/** One planned turn: a call, or the final answer built from the latest tool output. */
type Step = { say: string; call: PolicyCall } | { final: (output: string) => string };

/**
 * Scripted rollouts in a harness's own tool schema, for the dataset's math, code and swe rows: the
 * prompt is recognised by its tools (the harness) and its user messages before the first model turn
 * (the row). Math runs
 * a command that prints the answer (right or off by one) and answers it boxed; code writes
 * solution.py (the reference or a mutant), runs it on the example and answers in prose; swe applies
 * the reference fix with git (or leaves the repository as it is) and runs the tests. Right or
 * wrong is drawn once, on the first turn, with the row's probability; later turns read it back from
 * the transcript. A call of the harness's that is not the scripted conversation (a sub-agent, a
 * memory pass) is left to the filler text.
 */
export class HarnessPolicy implements SimPolicy {
  readonly name = 'harness';
  private readonly cache = new Map<string, TaskRow | null>();

  constructor(
    private readonly rows: TaskRow[],
    private readonly schemas: readonly HarnessToolSchema[] = HARNESS_SCHEMAS,
  ) {}

  respond(ctx: PolicyContext): PolicyTurn | undefined {
    const schema = this.schemas.find((s) => s.detect.every((n) => ctx.promptText.includes(`"name": "${n}"`)));
    if (!schema) return undefined;
    const t = parseTranscript(ctx.promptText);
    if (t.firstUser === undefined) return undefined;
    // The task may be in any user message before the first model turn (Codex sends its environment first).
    const from = ctx.promptText.indexOf('<|im_start|>user');
    const to = ctx.promptText.indexOf('<|im_start|>assistant', from);
    const row = this.find(ctx.promptText.slice(from, to < 0 ? undefined : to));
    if (!row) return undefined;
    const k = t.assistant.length;
    // Right or wrong: drawn on the first turn, read back from what that turn did.
    const right =
      k === 0
        ? ctx.rng() < (ctx.passRate ? ctx.passRate(`${row.task}:${row.key}`, row.p) : row.p)
        : t.assistant[0]!.text.replace(/^<think>[\s\S]*?<\/think>\s*/, '').startsWith(RIGHT_OPENING);
    const steps = plan(row, schema, right);
    if (k >= steps.length) return undefined;
    // Every earlier turn must be this plan's: another conversation is not scripted.
    for (let i = 0; i < k; i++) {
      const s = steps[i]!;
      if (!('call' in s) || t.assistant[i]!.calls[0]?.name !== s.call.name) return undefined;
    }
    const step = steps[k]!;
    const think = t.thinking ? '<think>\nFollow the plan.\n</think>\n\n' : '';
    if ('final' in step) return { text: `${think}${step.final(t.toolResponses.join('\n'))}` };
    const say = k === 0 ? `${right ? RIGHT_OPENING : WRONG_OPENING} ${step.say}` : step.say;
    return { text: `${think}${say}\n${renderCall(step.call)}` };
  }

  private find(user: string): TaskRow | undefined {
    let hit = this.cache.get(user);
    if (hit === undefined) {
      hit =
        this.rows.find(
          (r) => r.task !== 'custom' && user.includes((r.task === 'swe' ? r.instance.problem_statement : r.instance.problem).trim()),
        ) ?? null;
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(user, hit);
    }
    return hit ?? undefined;
  }
}

function plan(row: TaskRow, s: HarnessToolSchema, right: boolean): Step[] {
  if (row.task === 'math') {
    const value = right
      ? row.instance.answer
      : /^-?\d+$/.test(row.instance.answer)
        ? String(Number(row.instance.answer) + 1)
        : `${row.instance.answer}1`;
    return [
      {
        say: 'I will compute the value with Python.',
        call: s.run(`python3 -c 'print("ANSWER=" + ${JSON.stringify(value).replaceAll("'", "'\\''")})'`),
      },
      {
        final: (out) =>
          `The computation gives ${/ANSWER=(\S+)/.exec(out)?.[1] ?? value}, so the answer is \\boxed{${/ANSWER=(\S+)/.exec(out)?.[1] ?? value}}.`,
      },
    ];
  }
  if (row.task === 'code') {
    const ref = row.instance.reference_solution ?? 'print()\n';
    const example = statementExample(row.instance.problem) ?? row.instance.tests[0]!.input;
    return [
      { say: 'I will write the program to solution.py.', call: s.write(`${WS}/solution.py`, right ? ref : mutateProgram(ref)) },
      {
        say: 'Let me run it on the example.',
        call: s.run(`cd ${WS} && python3 solution.py <<'RAAS_EOF'\n${example.endsWith('\n') ? example : `${example}\n`}RAAS_EOF`),
      },
      { final: () => 'The program is written to /workspace/solution.py and runs on the example.' },
    ];
  }
  if (row.task === 'swe') {
    // Right: the reference fix applied with git; wrong: the repository left as it is.
    const patch = row.instance.gold_patch ?? (typeof row.instance.patch === 'string' ? row.instance.patch : undefined);
    if (!patch) return [];
    const fix = right
      ? `cd ${WS} && git apply <<'RAAS_EOF'\n${patch.endsWith('\n') ? patch : `${patch}\n`}RAAS_EOF`
      : `cd ${WS} && git status --short`;
    return [
      { say: 'I will fix the code.', call: s.run(fix) },
      { say: 'Let me run the tests.', call: s.run(`cd ${WS} && ${row.instance.test_command ?? 'python3 -m pytest -q'}`) },
      { final: () => 'The fix is in place and the tests were run.' },
    ];
  }
  return [];
}
