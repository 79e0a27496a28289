import type { ToolDefinition } from '../../../tokens/tokenizer.js';

/**
 * Tool definitions with the names and argument shapes of OpenHands CodeAct (which agent models are
 * trained on), described in our own words. Handlers pick the subset their task offers.
 */

/** The CodeAct tool names. */
export type ToolName = 'execute_bash' | 'execute_ipython_cell' | 'str_replace_editor' | 'think' | 'finish';

const fn = (name: ToolName, description: string, properties: Record<string, unknown>, required: string[]): ToolDefinition => ({
  type: 'function',
  function: { name, description, parameters: { type: 'object', properties, required } },
});

/** Bash in a persistent shell session inside the sandbox. */
const EXECUTE_BASH = fn(
  'execute_bash',
  'Run a bash command in a persistent shell in the sandbox (working directory /workspace; state such as the current directory and variables carries over between calls). ' +
    'Long-running commands return what they printed so far; send is_input=true with an empty command to see more output, or with C-c to interrupt. No network access.',
  {
    command: {
      type: 'string',
      description:
        'The command to run, or with is_input=true the text to type into the running program (C-c, C-d and C-z are control keys).',
    },
    is_input: {
      type: 'string',
      enum: ['true', 'false'],
      description: 'true to send command as input to the program that is still running instead of starting a new command.',
    },
    timeout: { type: 'number', description: 'Seconds to wait before the command is interrupted (optional).' },
  },
  ['command'],
);

/** A persistent Python interpreter. */
const EXECUTE_IPYTHON_CELL = fn(
  'execute_ipython_cell',
  'Run Python 3 code in a persistent interpreter (variables and imports stay defined between calls). Printed output is returned, and the value of a final expression is shown as Out.',
  { code: { type: 'string', description: 'The Python code to run.' } },
  ['code'],
);

/** The file editor. */
const STR_REPLACE_EDITOR = fn(
  'str_replace_editor',
  'View, create and edit files inside /workspace. view shows a file with line numbers (or lists a directory); create writes a new file; str_replace replaces old_str, which must occur exactly once, by new_str; ' +
    'insert adds new_str after line insert_line; undo_edit reverts the last edit of a file.',
  {
    command: { type: 'string', enum: ['view', 'create', 'str_replace', 'insert', 'undo_edit'], description: 'The operation.' },
    path: { type: 'string', description: 'Absolute path of the file or directory, such as /workspace/main.py.' },
    file_text: { type: 'string', description: 'For create: the whole content of the new file.' },
    old_str: {
      type: 'string',
      description: 'For str_replace: the exact text to replace, including whitespace; it must be unique in the file.',
    },
    new_str: { type: 'string', description: 'For str_replace: the replacement (empty deletes). For insert: the text to insert.' },
    insert_line: { type: 'integer', description: 'For insert: new_str goes after this line (0 inserts at the top).' },
    view_range: {
      type: 'array',
      items: { type: 'integer' },
      description: 'For view of a file: [first, last] line to show; last -1 means to the end.',
    },
  },
  ['command', 'path'],
);

/** A scratchpad that changes nothing. */
const THINK = fn(
  'think',
  'Write down reasoning, a plan or a hypothesis. It changes nothing in the sandbox; use it to think through a hard step before acting.',
  { thought: { type: 'string', description: 'The thought to record.' } },
  ['thought'],
);

/** Ends the episode; math's version carries the answer. */
function finishTool(withAnswer: boolean): ToolDefinition {
  return withAnswer
    ? fn(
        'finish',
        'Finish once you are confident in the result. Give the final answer (also write it as \\boxed{...} in your message).',
        {
          answer: {
            type: 'string',
            description: 'The final answer, as simple as possible (a number, a fraction such as 3/4, or a short LaTeX expression).',
          },
          message: { type: 'string', description: 'An optional closing note.' },
        },
        [],
      )
    : fn(
        'finish',
        'Finish when the task is done (or cannot be done). Nothing runs after this call.',
        {
          message: { type: 'string', description: 'A short summary of what was done.' },
        },
        [],
      );
}

/** The definitions of `names`, in the order given. */
export function toolDefinitions(names: readonly ToolName[], opts: { finishWithAnswer?: boolean } = {}): ToolDefinition[] {
  const byName: Record<ToolName, ToolDefinition> = {
    execute_bash: EXECUTE_BASH,
    execute_ipython_cell: EXECUTE_IPYTHON_CELL,
    str_replace_editor: STR_REPLACE_EDITOR,
    think: THINK,
    finish: finishTool(opts.finishWithAnswer ?? false),
  };
  return names.map((n) => byName[n]);
}
