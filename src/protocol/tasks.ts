import { z } from 'zod';

/**
 * Instance shapes of the built-in math / code / swe tasks, in our plain form, with veRL's dataset-row
 * form (`{data_source, prompt, reward_model: {ground_truth}, extra_info}`) normalised onto it first.
 * Shared by the handlers (validation at /process) and the simulator's scripted policies (which read
 * the same dataset files), so both see one shape.
 */

/** Data-source names of other frameworks, mapped onto our task names (ProRL, veRL, DeepScaleR, DeepCoder). */
export const TASK_ALIASES: Readonly<Record<string, 'math' | 'code' | 'swe'>> = {
  deepscaler: 'math',
  'agentica-org/DeepScaleR-Preview-Dataset': 'math',
  gsm8k: 'math',
  'openai/gsm8k': 'math',
  'lighteval/MATH': 'math',
  'DigitalLearningGmbH/MATH-lighteval': 'math',
  deepcoder: 'code',
  'agentica-org/DeepCoder-Preview-Dataset': 'code',
  livecodebench: 'code',
  primeintellect: 'code',
  taco: 'code',
  // ProRL Agent Server's code datasets (openhands/nvidia/__init__.py@40c1d8a:9-10 maps them to deepcoder).
  codecontests: 'code',
  apps: 'code',
  codeforces: 'code',
  swebench: 'swe',
  'swe-bench': 'swe',
  'swe-gym': 'swe',
};

/** Every alias of a task (for a handler's `aliases`). */
export function aliasesOf(task: 'math' | 'code' | 'swe'): string[] {
  return Object.entries(TASK_ALIASES)
    .filter(([, t]) => t === task)
    .map(([a]) => a);
}

/**
 * ProRL's prefix rule: any data_source whose first 9 characters are `deepcoder` is the code task
 * (`deepcoder_lcb`, `deepcoder-v2`, …; openhands/nvidia/registry.py@40c1d8a:133, 142).
 */
export function isDeepcoderName(dataSource: string): boolean {
  return dataSource.slice(0, 9) === 'deepcoder';
}

/** The task a data_source names (`math`, `code`, `swe`), following aliases; undefined for others. */
export function taskOf(dataSource: unknown): 'math' | 'code' | 'swe' | undefined {
  if (typeof dataSource !== 'string') return undefined;
  if (dataSource === 'math' || dataSource === 'code' || dataSource === 'swe') return dataSource;
  const alias = (k: string) => (Object.hasOwn(TASK_ALIASES, k) ? TASK_ALIASES[k] : undefined);
  return alias(dataSource) ?? alias(dataSource.toLowerCase()) ?? (isDeepcoderName(dataSource) ? 'code' : undefined);
}

/**
 * The error of a field that is absent (`missing`, which says how to provide it) or present with the
 * wrong type ("wrong type: expected …, got …"), so a present field is never reported as required.
 */
function fieldError(missing: string, expected: string): (iss: { input?: unknown }) => string {
  return (iss) => {
    if (iss.input === undefined) return missing;
    const got = JSON.stringify(iss.input) ?? String(iss.input);
    return `wrong type: expected ${expected}, got ${got.length > 60 ? `${got.slice(0, 57)}...` : got}`;
  };
}

/** A chat message of a veRL prompt. */
export const PromptMessage = z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() });
export type PromptMessage = z.infer<typeof PromptMessage>;

const Id = z.union([z.string().max(1024), z.number()]).optional();
/** Fields every task instance shares (the rest passes through). */
const base = {
  data_source: z.string().optional(),
  task: z.string().optional(),
  instance_id: Id,
  trajectory_id: Id,
  /** veRL's prompt, when the row came in that form: the handler sends these messages as given. */
  prompt_messages: z.array(PromptMessage).min(1).optional(),
};

/** A math problem: the answer is graded against the final `\boxed{}` (or the finish tool's answer). */
export const MathInstance = z.looseObject({
  ...base,
  problem: z
    .string({ error: fieldError('instance.problem is required (the question text), or send a veRL row with prompt', 'a string') })
    .min(1),
  answer: z
    .union([z.string(), z.number()], {
      error: fieldError(
        'instance.answer is required (the ground truth), or reward_model.ground_truth in a veRL row',
        'a string or a number',
      ),
    })
    .transform(String),
});
export type MathInstance = z.infer<typeof MathInstance>;

/** One hidden stdin/stdout test. */
export const CodeTest = z.object({
  input: z.string(),
  output: z.string(),
  /** DeepCoder / LiveCodeBench mark each test; only stdin/stdout programs are graded here. */
  testtype: z
    .literal('stdin', {
      error: 'only stdin/stdout tests are supported (testtype "stdin"); functional (call-based) tests need their own handler',
    })
    .optional(),
});
export type CodeTest = z.infer<typeof CodeTest>;

/** A stdin/stdout programming task; `tests` are hidden from the model. */
export const CodeInstance = z.looseObject({
  ...base,
  problem: z.string({ error: fieldError('instance.problem is required (the task statement)', 'a string') }).min(1),
  tests: z
    .array(CodeTest, {
      error: fieldError(
        'instance.tests is required: a list of {input, output} (or reward_model.ground_truth in a veRL row)',
        'a list of {input, output}',
      ),
    })
    .min(1, 'instance.tests needs at least one {input, output}'),
  reference_solution: z.string().optional(),
  time_limit_s: z.number().positive().max(600).default(5),
});
export type CodeInstance = z.infer<typeof CodeInstance>;

/** A path inside the repository: relative, no `..`, not inside `.git`. */
const RepoPath = z
  .string()
  .min(1)
  .max(4096)
  .refine(
    (p) =>
      !p.includes('\0') &&
      !p.startsWith('/') &&
      !p.split('/').some((s) => s === '..' || s === '.git') &&
      p.replace(/\/+$/, '') !== '' &&
      p !== '.',
    {
      message: 'must be a path relative to the repository root, without "..", outside .git',
    },
  );

/**
 * The test-log parsers of the swe handler: SWE-bench's (pytest and its variants, django, sympy,
 * seaborn, matplotlib), SWE-Gym's pydantic one, R2E-Gym's, and `unittest` for `python -m unittest -v`.
 */
export const SWE_LOG_PARSERS = [
  'pytest',
  'pytest_options',
  'pytest_v2',
  'pytest_pydantic',
  'django',
  'sympy',
  'seaborn',
  'matplotlib',
  'unittest',
  'r2e',
] as const;
const LogParserName = z.enum(SWE_LOG_PARSERS, { error: `must be one of ${SWE_LOG_PARSERS.join(', ')}` });

/** A GitHub repository name as SWE-bench writes it (`owner/name`); it names host paths, so nothing else. */
const REPO_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;
const REPO_MESSAGE = 'instance.repo must be "owner/name" (letters, digits, "_", ".", "-"), as in SWE-bench';

/**
 * A repository task: fix the bug so FAIL_TO_PASS pass and PASS_TO_PASS keep passing. The repository
 * is the instance's `files` map, a `tarball` on the server, or (SWE-bench rows as ProRL takes them)
 * `repo` at `base_commit`, found in the operator's `handlers.swe.repos_dir` or `images_dir`.
 */
export const SweInstance = z
  .looseObject({
    ...base,
    problem_statement: z.string({ error: fieldError('instance.problem_statement is required (the issue text)', 'a string') }).min(1),
    /** The repository as a files map (path relative to the repository root → content). */
    files: z.record(z.string().min(1), z.string()).optional(),
    /**
     * Or a tarball (.tar, .tar.gz, .tgz) on the server's disk: inside one of `sandbox.data_dirs` (absolute,
     * or relative to one of them), a regular file; checked at /process.
     */
    tarball: z.string().min(1).max(4096).optional(),
    /** Or a SWE-bench row: `owner/name` of the repository (checked where it is used: rows with files or a tarball may carry any). */
    repo: z.string().optional(),
    /** The commit the task starts from (full or abbreviated hex id). */
    base_commit: z.string().optional(),
    /** SWE-bench's version of the repository's environment (a string; some exports write it as a number). */
    version: z.union([z.string().max(64), z.number()]).optional(),
    /**
     * Appended to by the test ids. Default: `handlers.swe.test_command`, else for a SWE-bench row
     * SWE-bench's command for its repository (see testRunner in the swe handler), else `python3 -m unittest`.
     */
    test_command: z.string().min(1).optional(),
    /** SWE-bench's spelling of test_command (its specs' `test_cmd`; a list means its last entry, as SWE-bench's grading reads it). */
    test_cmd: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
    /**
     * How the test log is read: one of SWE_LOG_PARSERS. Default: SWE-bench's parser for the row's
     * repository, else the one the test command implies (pytest with -rA, python -m unittest),
     * else none: each test is then decided by exit status.
     */
    log_parser: LogParserName.optional(),
    /** An R2E-Gym row's expected per-test outcome (a JSON object, or its text): graded by comparing the parsed run_tests.sh log with it. */
    expected_output_json: z.union([z.string(), z.record(z.string(), z.string())]).optional(),
    FAIL_TO_PASS: z.array(z.string().min(1)).default([]),
    PASS_TO_PASS: z.array(z.string().min(1)).default([]),
    /**
     * SWE-bench's test patch: applied with `git apply` after the model's patch, once every file it
     * touches is reset to the base commit (so a model patch that edits or deletes them gains nothing).
     */
    test_patch: z.string().optional(),
    /** Paths (files or directories) reset to the base commit after the model's patch, before the tests run. */
    test_files: z.array(RepoPath).max(10_000).optional(),
    gold_patch: z.string().optional(),
    /** An R2E-Gym row's image (`namanjain12/aiohttp_final:<sha>`): looked up under handlers.swe.images_dir; the repository is its /testbed. */
    docker_image: z.string().min(1).max(300).optional(),
  })
  .superRefine((i, ctx) => {
    if (i.FAIL_TO_PASS.length === 0 && i.expected_output_json === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['FAIL_TO_PASS'],
        message: 'instance.FAIL_TO_PASS needs at least one test id (or, for an R2E-Gym row, instance.expected_output_json)',
      });
    }
    if (i.files !== undefined || i.tarball !== undefined) return;
    // A row with an image of its own (R2E-Gym) brings its repository in the image.
    if (i.docker_image !== undefined && i.repo === undefined && i.base_commit === undefined) return;
    if (i.repo === undefined && i.base_commit === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['files'],
        message:
          'instance.files (a map of path → content), instance.tarball (a path on the server) or instance.repo with instance.base_commit (a SWE-bench row) is required',
      });
      return;
    }
    if (typeof i.repo !== 'string' || !REPO_NAME.test(i.repo) || i.repo.split('/').some((p) => p === '.' || p === '..')) {
      ctx.addIssue({ code: 'custom', path: ['repo'], message: REPO_MESSAGE });
    }
    if (typeof i.base_commit !== 'string' || !/^[0-9a-fA-F]{7,64}$/.test(i.base_commit)) {
      ctx.addIssue({
        code: 'custom',
        path: ['base_commit'],
        message: 'instance.base_commit must be a commit id (7 to 64 hex digits), as in SWE-bench',
      });
    }
  });
export type SweInstance = z.infer<typeof SweInstance>;

const HostDir = (key: string) =>
  z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => p.startsWith('/'), { message: `handlers.swe.${key} must be an absolute path (it is bound into sandboxes read-only)` });

/**
 * `handlers.swe` in the server config. Where SWE-bench rows (`repo` + `base_commit`, no files) find
 * their repository, and the grading knobs; other keys (`max_iterations`, …) pass through.
 */
export const SweHandlerConfig = z.looseObject({
  /** Bare mirrors (`<owner>__<name>.git`, `<owner>/<name>.git`) or bundles (`<owner>__<name>.bundle`), readable by sandbox.user. */
  repos_dir: HostDir('repos_dir').optional(),
  /**
   * Per-instance images (`sweb.eval.x86_64.<id>`, see image_names): unpacked root directories, `.sif`
   * files, OCI layouts or `docker save` archives whose /testbed is the repository. The instance's
   * sandboxes are rooted in its image (sandbox.runtime bwrap or apptainer), unless image_root is false.
   */
  images_dir: HostDir('images_dir').optional(),
  /**
   * Names an instance's image may have under images_dir, tried in order: `{prorl_id}` (instance_id,
   * `__` → `_s_`, lowercased), `{swebench_id}` (`__` → `_1776_`), `{instance_id}`, `{docker_image}`
   * (an R2E-Gym row's, `/` and `:` → `_`). Default: sweb.eval.x86_64.{prorl_id}, sweb.eval.x86_64.{swebench_id}, {docker_image}.
   */
  image_names: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  /** Root the instance's sandboxes in its image (default true); false takes only the repository from it, tests then run on the sandbox's own userland. */
  image_root: z.boolean().optional(),
  /** The repository inside an image (default /testbed). */
  image_workdir: z
    .string()
    .refine((p) => p.startsWith('/') && p !== '/', { message: 'handlers.swe.image_workdir must be an absolute path other than /' })
    .optional(),
  /** Replace the image repository's history by its HEAD alone in the agent's sandbox (default true): later commits stay out of reach. */
  hide_history: z.boolean().optional(),
  /** The test command of every row without its own `test_command` (ids are appended). */
  test_command: z.string().min(1).optional(),
  /** How test logs are read when the instance does not say (instance.log_parser). */
  log_parser: LogParserName.optional(),
  /** Seconds one test command may run. */
  test_timeout_s: z.number().positive().optional(),
  /** Tamper canaries in every graded log run (default true). */
  canaries: z.boolean().optional(),
  /** Largest test log read, in bytes (default 16 MiB); a longer log is not graded (filter_reason eval_log_truncated). */
  max_log_bytes: z
    .number()
    .int()
    .positive()
    .max(64 << 20)
    .optional(),
  /** Which unreliable-reward reasons mark a result `filter: true`: false for none, or `{reason: false}` to turn one off. */
  filter: z.union([z.literal(false), z.record(z.string(), z.boolean())]).optional(),
  /** Largest git_patch captured, in bytes. */
  max_patch_bytes: z.number().int().positive().optional(),
  /** Largest repository snapshot (the base commit, gzipped) taken from repos_dir or images_dir, in bytes. */
  max_repo_bytes: z.number().int().positive().optional(),
});
export type SweHandlerConfig = z.infer<typeof SweHandlerConfig>;

/**
 * Turns a veRL dataset row into our plain form (plain rows pass through unchanged). JSON-string
 * fields (veRL's `prompt` as a string, SWE-bench's FAIL_TO_PASS as a string, DeepCoder's tests as a
 * string) are parsed; anything unparsable is left as is for the schema to name.
 */
export function normaliseRow(row: unknown): unknown {
  if (!row || typeof row !== 'object' || Array.isArray(row)) return row;
  const r = { ...(row as Record<string, unknown>) };
  const task = taskOf(r.data_source ?? r.task);
  for (const k of ['FAIL_TO_PASS', 'PASS_TO_PASS', 'tests', 'files', 'test_files'] as const) r[k] = parseJsonString(r[k]);
  if (r.prompt === undefined && r.reward_model === undefined) return r;

  const extra = (parseJsonString(r.extra_info) ?? {}) as Record<string, unknown>;
  const messages = parseJsonString(r.prompt);
  const gt = parseJsonString((r.reward_model as Record<string, unknown> | undefined)?.ground_truth);
  const out: Record<string, unknown> = { ...extra, ...r };
  delete out.prompt;
  delete out.reward_model;
  delete out.extra_info;
  out.instance_id ??= extra.instance_id ?? extra.index;
  // Parquet INT64 columns read as BigInt (pandas writes veRL's index that way).
  if (typeof out.instance_id === 'bigint')
    out.instance_id = Number.isSafeInteger(Number(out.instance_id)) ? Number(out.instance_id) : String(out.instance_id);
  if (Array.isArray(messages)) {
    out.prompt_messages = messages;
    const user = [...messages].reverse().find((m) => m && typeof m === 'object' && (m as { role?: unknown }).role === 'user') as
      | { content?: unknown }
      | undefined;
    const text = typeof user?.content === 'string' ? user.content : undefined;
    if (task === 'swe') out.problem_statement ??= text;
    else out.problem ??= text;
  } else if (typeof messages === 'string') {
    if (task === 'swe') out.problem_statement ??= messages;
    else out.problem ??= messages;
  }
  if (task === 'math') out.answer ??= gt;
  if (task === 'code') out.tests ??= codeTests(gt);
  if (task === 'swe' && gt && typeof gt === 'object' && !Array.isArray(gt)) {
    for (const [k, v] of Object.entries(gt)) out[k] ??= parseJsonString(v);
  }
  for (const k of ['FAIL_TO_PASS', 'PASS_TO_PASS', 'tests', 'files', 'test_files'] as const) out[k] = parseJsonString(out[k]);
  return out;
}

/** DeepCoder / TACO / APPS test lists: `[{input, output}]` or `{inputs: [], outputs: []}`. */
function codeTests(gt: unknown): unknown {
  if (Array.isArray(gt)) {
    return gt.map((t) => {
      if (!t || typeof t !== 'object') return t;
      const { input, output, testtype } = t as Record<string, unknown>;
      return { input: String(input ?? ''), output: String(output ?? ''), ...(testtype === undefined ? {} : { testtype }) };
    });
  }
  if (gt && typeof gt === 'object') {
    const { inputs, outputs } = gt as { inputs?: unknown; outputs?: unknown };
    if (Array.isArray(inputs) && Array.isArray(outputs))
      return inputs.map((input, i) => ({ input: String(input), output: String(outputs[i] ?? '') }));
  }
  return gt;
}

function parseJsonString(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  const t = v.trim();
  if (!(t.startsWith('[') || t.startsWith('{'))) return v;
  try {
    return JSON.parse(t);
  } catch {
    return v;
  }
}
