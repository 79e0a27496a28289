import { z } from 'zod';
import { fieldPath } from '../../../protocol/errors.js';
import type { ParsedToolCall, ToolExecutor, ToolOutcome } from '../../agent/types.js';
import type { EditOp, Sandbox } from '../../sandbox/types.js';
import type { ToolName } from './tools.js';
import { capText } from '../../tools/output-cap.js';

const Bool = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);

/** Argument schemas of the CodeAct tools; a call that fails one gets an error observation naming the field. */
const ARGS = {
  execute_bash: z.object({
    command: z.string({ error: 'command is required (a string)' }),
    is_input: Bool.optional(),
    timeout: z.coerce.number().positive().optional(),
  }),
  execute_ipython_cell: z.object({ code: z.string({ error: 'code is required (a string)' }) }),
  str_replace_editor: z.object({
    command: z.enum(['view', 'create', 'str_replace', 'insert', 'undo_edit'], {
      error: 'command must be one of view, create, str_replace, insert, undo_edit',
    }),
    path: z.string({ error: 'path is required (an absolute path such as /workspace/file.py)' }).min(1),
    file_text: z.string().optional(),
    old_str: z.string().optional(),
    new_str: z.string().optional(),
    insert_line: z.coerce.number().int().nonnegative().optional(),
    view_range: z.array(z.coerce.number().int()).length(2).optional(),
  }),
  think: z.object({ thought: z.string().optional() }).loose(),
  finish: z.object({ message: z.string().optional(), answer: z.union([z.string(), z.number()]).optional() }).loose(),
} as const;

/** Options of the tool executor. */
export interface ExecutorOptions {
  /** Hard limit of one bash command (the model's `timeout` is capped by it). */
  bashTimeoutS?: number;
  /** Answer a bash command that prints nothing new for this long (it keeps running). */
  noChangeTimeoutS?: number;
  pythonTimeoutS?: number;
  /** Characters of one observation at most (head and tail kept): what reaches the tokenizer. */
  maxObservationChars?: number;
}

/** Default cap of one observation: the tool server caps each field, this caps their sum. */
const MAX_OBSERVATION_CHARS = 64_000;

/**
 * Runs CodeAct tool calls against a sandbox. Refusals (unknown tool, bad arguments, no sandbox)
 * become observations the model can act on; only cancellation propagates.
 */
export function sandboxExecutor(sandbox: Sandbox | undefined, tools: readonly ToolName[], opts: ExecutorOptions = {}): ToolExecutor {
  const allowed = new Set<string>(tools);
  return async (call: ParsedToolCall, signal: AbortSignal): Promise<ToolOutcome> => {
    if (!allowed.has(call.name))
      return { observation: `ERROR: unknown tool ${JSON.stringify(call.name)}; the tools are ${[...allowed].join(', ')}.` };
    const schema = ARGS[call.name as ToolName];
    const parsed = schema.safeParse(call.arguments ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return { observation: `ERROR: invalid arguments for ${call.name}: ${fieldPath(issue.path)}: ${issue.message}` };
    }
    const args = parsed.data as Record<string, unknown>;
    switch (call.name as ToolName) {
      case 'think':
        return { observation: 'Your thought has been logged.' };
      case 'finish':
        return { observation: '', finish: true };
      default:
        break;
    }
    if (!sandbox) return { observation: `ERROR: ${call.name} is unavailable: this job has no sandbox.` };
    signal.throwIfAborted();
    // Tool output is the task's to shape: bounded before it is tokenized on the server's event loop.
    const cap = (text: string): string => capText(text, opts.maxObservationChars ?? MAX_OBSERVATION_CHARS).text;
    if (call.name === 'execute_bash')
      return { observation: cap(await bash(sandbox, args as z.infer<typeof ARGS.execute_bash>, opts, signal)) };
    if (call.name === 'execute_ipython_cell')
      return { observation: cap(await python(sandbox, (args as { code: string }).code, opts, signal)) };
    return { observation: cap(await edit(sandbox, args as z.infer<typeof ARGS.str_replace_editor>, signal)) };
  };
}

async function bash(
  sb: Sandbox,
  a: { command: string; is_input?: boolean; timeout?: number },
  opts: ExecutorOptions,
  signal: AbortSignal,
): Promise<string> {
  const cap = opts.bashTimeoutS ?? 120;
  const timeout = Math.min(a.timeout ?? cap, cap);
  const r = await sb.bash(a.command, {
    timeout_s: timeout,
    no_change_timeout_s: opts.noChangeTimeoutS ?? 30,
    is_input: a.is_input,
    signal,
  });
  let out = r.output.replace(/\s+$/, '');
  if (r.truncated) out += '\n[Output truncated.]';
  if (r.timed_out) return `${out}\n[The command timed out after ${timeout} seconds and was interrupted.]`;
  if (r.running)
    return `${out}\n[The command is still running. Send an empty command with is_input=true to see more output, or C-c to interrupt it.]`;
  return `${out}\n[The command completed with exit code ${r.exit_code ?? 'unknown'}.]`.replace(/^\n/, '');
}

async function python(sb: Sandbox, code: string, opts: ExecutorOptions, signal: AbortSignal): Promise<string> {
  const r = await sb.python(code, { timeout_s: opts.pythonTimeoutS ?? 60, signal });
  const parts: string[] = [];
  if (r.stdout) parts.push(r.stdout.replace(/\n$/, ''));
  if (r.stderr) parts.push(r.stderr.replace(/\n$/, ''));
  if (r.result !== undefined && r.result !== 'None') parts.push(`Out: ${r.result}`);
  if (r.error) parts.push(r.error.traceback || `${r.error.type}: ${r.error.message}`);
  if (r.timed_out) parts.push('[The code timed out and was interrupted.]');
  return parts.length ? parts.join('\n') : '[Code ran with no output.]';
}

async function edit(sb: Sandbox, a: z.infer<typeof ARGS.str_replace_editor>, signal: AbortSignal): Promise<string> {
  let op: EditOp;
  switch (a.command) {
    case 'view':
      op = { command: 'view', path: a.path, ...(a.view_range ? { view_range: a.view_range as [number, number] } : {}) };
      break;
    case 'create':
      if (a.file_text === undefined) return 'ERROR: invalid arguments for str_replace_editor: file_text is required for create';
      op = { command: 'create', path: a.path, file_text: a.file_text };
      break;
    case 'str_replace':
      if (a.old_str === undefined) return 'ERROR: invalid arguments for str_replace_editor: old_str is required for str_replace';
      op = { command: 'str_replace', path: a.path, old_str: a.old_str, new_str: a.new_str ?? '' };
      break;
    case 'insert':
      if (a.insert_line === undefined || a.new_str === undefined)
        return 'ERROR: invalid arguments for str_replace_editor: insert needs insert_line and new_str';
      op = { command: 'insert', path: a.path, insert_line: a.insert_line, new_str: a.new_str };
      break;
    default:
      op = { command: 'undo_edit', path: a.path };
  }
  const r = await sb.edit(op, { signal });
  return r.ok ? r.output : `ERROR: ${r.output}`;
}
