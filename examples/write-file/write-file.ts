// examples/write-file/write-file.ts: the handler (npx tsc -p examples/write-file compiles it to dist/write-file.js)
import { z } from 'zod';
import { firstMessages, runToolAgent, type AgentHandler } from 'raas';

// The instance schema: validated at /process, a 400 names the bad field before any sandbox starts.
const WriteFileInstance = z.looseObject({
  data_source: z.string().optional(),
  instance_id: z.union([z.string(), z.number()]).optional(),
  path: z.string().regex(/^[\w][\w./-]*$/, 'instance.path must be a relative file name such as notes/hello.txt'),
  content: z.string(),
});
type WriteFileInstance = z.infer<typeof WriteFileInstance>;

const writeFile: AgentHandler<WriteFileInstance> = {
  name: 'write_file',
  aliases: ['touch'],
  instance: WriteFileInstance,

  // INIT: open the sandbox RUN will use (closed by the pipeline right after RUN).
  async init(ctx) {
    return { runtime: await ctx.sandboxes.open({ network: false }, ctx.signal) };
  },

  // RUN: the agent loop with tools; collect what EVAL needs into artifacts (the sandbox is gone by then).
  async run(ctx) {
    const { path, content } = ctx.job.instance;
    const { run } = await runToolAgent(ctx, {
      messages: firstMessages(
        'You work in a Linux sandbox. Use the tools, then call finish.',
        `Create /workspace/${path} whose content is exactly:\n${content}`,
      ),
      tools: ['execute_bash', 'str_replace_editor', 'finish'],
      defaults: { max_iterations: 8 },
    });
    const read = await ctx.runtime!.python(
      `import pathlib\np = pathlib.Path('/workspace') / ${JSON.stringify(path)}\nprint(p.read_text() if p.is_file() else '', end='')`,
      { signal: ctx.signal },
    );
    run.artifacts.written = read.stdout;
    return run;
  },

  // EVAL: the reward. Open fresh sandboxes here with ctx.sandboxes.open if grading needs to run code.
  async eval(ctx) {
    const ok = ctx.run.artifacts.written === ctx.job.instance.content;
    return { reward: ok ? 1 : 0, resolved: ok, details: { written_chars: String(ctx.run.artifacts.written ?? '').length } };
  },
};

export default writeFile;
