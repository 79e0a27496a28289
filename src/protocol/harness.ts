import { z } from 'zod';

/** A harness's name: a config key and a directory name inside the sandbox. */
const HarnessName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a harness name is letters, digits, ".", "_" or "-"');

/** One agent CLI the `harness` handler can run (`handlers.harness.harnesses.<name>`). */
export const HarnessSpec = z.strictObject({
  /** argv run inside the sandbox; `{prompt}`, `{prompt_file}`, `{base_url}`, `{port}` are replaced. */
  command: z.array(z.string().min(1)).min(1, 'command needs at least the program'),
  /** Extra environment (the base URLs and keys are set already); values may use the same placeholders. */
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).default({}),
  /** Seconds the harness may run (the job's timeout_s still applies). */
  timeout_s: z
    .number()
    .positive()
    .max(7 * 24 * 3600)
    .default(1800),
  /** How the task prompt reaches the harness: an argument, its stdin, or a file in its working directory. */
  prompt: z.enum(['arg', 'stdin', 'file']).default('arg'),
  /** The prompt file's path for `prompt: file`, relative to the working directory. */
  prompt_file: z.string().min(1).default('.raas-prompt.md'),
  /**
   * Host directory holding the harness (an npm prefix installed once by the operator), bound
   * read-only at /opt/raas/harness/<name>; its bin/ and node_modules/.bin/ lead PATH.
   */
  dir: z.string().min(1).optional(),
  /** Files written into the workspace before the harness starts (settings it reads), path → content. */
  files: z.record(z.string().min(1), z.string()).default({}),
});
export type HarnessSpec = z.infer<typeof HarnessSpec>;

/** `handlers.harness` of the server config. */
export const HarnessHandlerConfig = z.looseObject({
  harnesses: z.record(HarnessName, HarnessSpec).default({}),
  /** The harness an instance without `harness` runs. */
  default: HarnessName.optional(),
  /** How tool calls are read from the model's output (vLLM's parser names: hermes, qwen3_coder). */
  tool_parser: z.string().default('hermes'),
  /** The model name GET /v1/models lists (any name is accepted in requests). */
  model: z.string().min(1).default('raas-policy'),
  /** Cap of one call when sampling_params set none. */
  max_tokens_per_turn: z.number().int().positive().default(4096),
  /**
   * Conversations (segments) one job keeps; a call that would open one more is refused (400). Each
   * keeps its prompt ids and goes into the result, so without a cap a harness making short calls of
   * new conversations grows the server's memory and the result without bound.
   */
  max_segments: z.number().int().positive().default(64),
  /** Reward 0 for a rollout with any tool call that did not parse (ProRL's invalid-format penalty). */
  zero_reward_on_invalid_tool_calls: z.boolean().default(false),
  /** The node that runs the loopback relay inside the sandbox (any node ≥ 18 on the sandbox's PATH). */
  node: z.string().min(1).default('node'),
  /**
   * sandbox.limits.memory_mb for harness sandboxes. It is also the address-space rlimit of the
   * sandbox's processes, and node-based harnesses reserve far more address space than they use
   * (V8's heap cage, and about 10 GB per WebAssembly memory: undici's HTTP parser is one), so the
   * default is higher than other tasks'; a cgroup, where there is one, still bounds real memory.
   */
  memory_mb: z.number().int().positive().default(32768),
  /** Bytes of the harness's output tail kept in the result. */
  output_tail_bytes: z
    .number()
    .int()
    .positive()
    .max(1 << 20)
    .default(16 * 1024),
});
export type HarnessHandlerConfig = z.infer<typeof HarnessHandlerConfig>;

/** What the harness's grader is: the task a harness instance is graded as. */
export const HarnessGrader = z.enum(['math', 'code', 'swe', 'none']);
export type HarnessGrader = z.infer<typeof HarnessGrader>;

/** A `harness` instance: which harness, which grader, an optional prompt; the grader's own task fields beside them. */
export const HarnessInstance = z.looseObject({
  data_source: z.string().optional(),
  task: z.string().optional(),
  instance_id: z.union([z.string(), z.number()]).optional(),
  trajectory_id: z.union([z.string(), z.number()]).optional(),
  harness: HarnessName.optional(),
  /** Absent: read from the row's fields (problem_statement: swe, tests: code, answer: math, else none). */
  grader: HarnessGrader.optional(),
  /** The prompt the harness gets; default: the grader task's own prompt (the problem, where the program goes). */
  prompt: z.string().min(1).optional(),
});
export type HarnessInstance = z.infer<typeof HarnessInstance>;
