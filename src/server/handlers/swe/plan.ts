import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';
import { repoParser, type LogParserName } from './parsers/index.js';
import { djangoTestLabel, mypyKeys, specTestCommand, specTestEnv, testDirectives } from './specs.js';

/**
 * How one instance is graded: the test command (shell text; the arguments follow as "$@"), its
 * arguments, and how its log is read. `log`: the command runs once and each test's status comes
 * from the log (SWE-bench's way); `exit_status`: a command without a parser, each test decided by
 * the exit status of a run (all together first, then each alone when that fails).
 */
export interface GradingPlan {
  mode: 'log' | 'exit_status';
  command: string;
  args: string[];
  parser?: LogParserName;
  /** Variables set for the test process (SWE-bench's eval_commands exports). */
  env: Record<string, string>;
  /** The row is a SWE-bench / SWE-Gym row (repo + base_commit, no files or tarball). */
  sweBenchRow: boolean;
  /** The row is an R2E-Gym row (expected_output_json): graded against that map. */
  r2e: boolean;
  /** Canaries cannot be added (a `-k` selection would drop them). */
  noCanaries?: boolean;
}

/** The parser a test command implies (pytest, python -m unittest), with the reporting flag it needs added. */
export function impliedParser(command: string): { parser: LogParserName; command: string } | undefined {
  const unittest = /^(\s*(?:\w+=\S*\s+)*(?:\S*\/)?python[\d.]*\s+-m\s+unittest)\b(.*)$/s.exec(command);
  if (unittest) {
    const [, head, tail] = unittest as unknown as [string, string, string];
    const verbose = /(^|\s)(-v|--verbose)(\s|$)/.test(tail);
    return { parser: 'unittest', command: verbose ? command : `${head} -v${tail}` };
  }
  if (/^\s*(?:\w+=\S*\s+)*(?:(?:\S*\/)?(?:pytest|py\.test)|(?:\S*\/)?python[\d.]*\s+-m\s+pytest)(\s|$)/.test(command)) {
    // parse_log_pytest reads the short summary, which lists passed tests only under -rA.
    return { parser: 'pytest', command: /(^|\s)-r\S*A/.test(command) ? command : `${command.trimEnd()} -rA` };
  }
  return undefined;
}

/** The instance's own command: test_command, else SWE-bench's `test_cmd` (a list: its last entry, grading.py@726c546:55-56). */
function ownCommand(inst: SweInstance): string | undefined {
  if (inst.test_command) return inst.test_command;
  const c = inst.test_cmd;
  return Array.isArray(c) ? c[c.length - 1] : c;
}

/**
 * The plan for an instance. The command: the instance's own (test_command / test_cmd), else
 * handlers.swe.test_command, else for an R2E-Gym row `bash run_tests.sh`, for a SWE-bench row
 * SWE-bench's (or SWE-Gym's) command for its repository and version (`pytest -rA` for another
 * repository), else `python3 -m unittest -v`. The parser: instance.log_parser, else
 * handlers.swe.log_parser, else R2E-Gym's for its rows, SWE-bench's for the repository, else the
 * one the command implies; none: exit status. The arguments: for a SWE-bench row the directives
 * of its test_patch (as SWE-bench's eval script), else the test ids.
 */
export function gradingPlan(inst: SweInstance, cfg: SweHandlerConfig): GradingPlan {
  const sweBenchRow = inst.files === undefined && inst.tarball === undefined && !!inst.repo;
  const r2e = inst.expected_output_json !== undefined;
  const repo = inst.repo ?? '';
  let command =
    ownCommand(inst) ??
    cfg.test_command ??
    (r2e ? 'bash run_tests.sh' : sweBenchRow ? (specTestCommand(repo, inst.version) ?? 'pytest -rA') : 'python3 -m unittest -v');
  let parser: LogParserName | undefined = inst.log_parser ?? cfg.log_parser ?? (r2e ? 'r2e' : sweBenchRow ? repoParser(repo) : undefined);
  if (!parser) {
    const implied = impliedParser(command);
    if (implied) ({ parser, command } = implied);
  }
  const ids = [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS];
  let args: string[] = ids;
  let noCanaries: boolean | undefined;
  if (r2e) args = [];
  else if (sweBenchRow && parser) {
    if (repo.toLowerCase() === 'python/mypy' && /-k\s*$/.test(command)) {
      args = [mypyKeys(inst.test_patch)];
      noCanaries = true;
    } else {
      const directives = testDirectives(repo, inst.test_patch);
      args = directives.length ? directives : repo === 'django/django' ? ids.map(djangoTestLabel) : ids;
    }
  } else if (sweBenchRow && repo === 'django/django') args = ids.map(djangoTestLabel);
  else if (parser && parser !== 'unittest' && ids.length > 1 && ids.every((t) => /^[^:\s]+\.py::/.test(t))) {
    // pytest node ids: their files, as SWE-bench's eval script runs the test files (collecting a
    // file once instead of once per id; the log names every test of them).
    args = [...new Set(ids.map((t) => t.slice(0, t.indexOf('::'))))];
  }
  return {
    mode: parser ? 'log' : 'exit_status',
    command,
    args,
    ...(parser ? { parser } : {}),
    env: sweBenchRow ? specTestEnv(repo, inst.version) : {},
    sweBenchRow,
    r2e,
    ...(noCanaries ? { noCanaries } : {}),
  };
}
