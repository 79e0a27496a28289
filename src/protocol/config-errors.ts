import type { z } from 'zod';
import { RaasError } from './errors.js';
import { SAMPLING_HINTS } from './llm.js';

type Path = ReadonlyArray<PropertyKey>;

/** Edit distance (insertions, deletions, substitutions) between two keys. */
export function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The valid key nearest to `word`, when it is close enough to be a typo (a third of its length, at least 2 edits). */
export function nearestKey(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = levenshtein(word.toLowerCase(), c.toLowerCase());
    if (d < bestD) [best, bestD] = [c, d];
  }
  return best;
}

/** `a.b[2].c`, the key path as a user writes it. */
function keyPath(path: Path): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(top level)';
}

type Def = {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  options?: z.ZodType[];
  getter?: () => z.ZodType;
};
const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

/** The keys of the object schema found at `path` inside `schema` (through defaults, unions, arrays, records), if any. */
export function keysAt(schema: z.ZodType, path: Path): string[] | undefined {
  const d = defOf(schema);
  if (d.innerType) return keysAt(d.innerType, path);
  if (d.type === 'pipe' && d.in) return keysAt(d.in, path);
  if (d.type === 'lazy' && d.getter) return keysAt(d.getter(), path);
  if (d.type === 'union') {
    for (const o of d.options ?? []) {
      const k = keysAt(o, path);
      if (k) return k;
    }
    return undefined;
  }
  if (path.length === 0) return d.type === 'object' && d.shape ? Object.keys(d.shape) : undefined;
  const [head, ...rest] = path;
  if (d.type === 'object' && d.shape && typeof head === 'string' && d.shape[head]) return keysAt(d.shape[head], rest);
  if (d.type === 'array' && d.element) return keysAt(d.element, rest);
  if (d.type === 'record' && d.valueType) return keysAt(d.valueType, rest);
  return undefined;
}

/** Where a value came from, for the message: the file, or the `--set` flag that wrote it. */
export interface IssueSource {
  /** The config file (or another label such as "Coordinator config"). */
  file: string;
  /** `--set` assignments by key path; an issue under one of them names the flag instead of the file. */
  sets?: ReadonlyArray<{ path: string[]; text: string }>;
}

/** One line: `<file or --set k=v>: \`full.key.path\`: what is wrong (and the nearest valid key). */
function issueLine(schema: z.ZodType, issue: z.core.$ZodIssue, prefix: Path, src: IssueSource): string[] {
  const within = (p: Path): string => {
    const full = [...prefix, ...p].map(String);
    const set = src.sets?.find((s) => s.path.every((k, i) => full[i] === k) || full.every((k, i) => s.path[i] === k));
    return set ? `--set ${set.text}` : src.file;
  };
  if (issue.code === 'unrecognized_keys') {
    const valid = keysAt(schema, issue.path) ?? [];
    return issue.keys.map((k) => {
      const p = [...issue.path, k];
      const full = keyPath([...prefix, ...p]);
      const hint =
        issue.path.at(-1) === 'sampling_params' || (prefix.at(-1) === 'sampling_params' && issue.path.length === 0)
          ? SAMPLING_HINTS[k]
          : undefined;
      if (hint) return `${within(p)}: \`${full}\`: ${hint}`;
      const near = nearestKey(k, valid);
      const tail = near ? `did you mean \`${near}\`?` : valid.length ? `valid keys here: ${valid.join(', ')}` : 'remove it';
      return `${within(p)}: \`${full}\`: unknown key; ${tail}`;
    });
  }
  if (issue.code === 'invalid_union' && issue.errors.length) {
    // No branch matched: report the branch that got furthest into the value (its deepest issue),
    // then the one with fewest issues. `embedded: {backends: two}` is the object branch's
    // `embedded.backends`, not the boolean branch's `embedded`.
    const best = bestBranch(issue.errors);
    return best.flatMap((i) => issueLine(schema, { ...i, path: [...issue.path, ...i.path] } as z.core.$ZodIssue, prefix, src));
  }
  return [`${within(issue.path)}: \`${keyPath([...prefix, ...issue.path])}\`: ${issueMessage(issue)}`];
}

/** The deepest issue of a union branch (nested unions included). */
function depthOf(issues: ReadonlyArray<z.core.$ZodIssue>): number {
  let d = 0;
  for (const i of issues) {
    const inner = i.code === 'invalid_union' && i.errors.length ? depthOf(bestBranch(i.errors)) : 0;
    d = Math.max(d, i.path.length + inner);
  }
  return d;
}

/** The union branch that got furthest: its deepest issue first, then the fewest issues; ties go to the first branch. */
function bestBranch(branches: ReadonlyArray<ReadonlyArray<z.core.$ZodIssue>>): ReadonlyArray<z.core.$ZodIssue> {
  let best = branches[0]!;
  for (const b of branches.slice(1)) {
    const [db, dBest] = [depthOf(b), depthOf(best)];
    if (db > dBest || (db === dBest && b.length < best.length)) best = b;
  }
  return best;
}

/** A value as a message quotes it: short, on one line (a value nested too deep to serialize is named by its kind). */
function shown(v: unknown): string {
  let s: string;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = Array.isArray(v) ? '[…]' : typeof v === 'object' && v !== null ? '{…}' : String(v);
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/** What zod reports as the expected type, as a user reads it. */
function expectedText(expected: string): string {
  return expected === 'int' ? 'an integer' : expected === 'array' ? 'a list' : expected === 'object' ? 'a mapping' : expected;
}

/**
 * zod's message, with the value that was given when zod reports it. A key that is present with the
 * wrong type says so ("wrong type: expected …, got …"); "required" is kept for a missing one.
 */
export function issueMessage(issue: z.core.$ZodIssue): string {
  const input = (issue as { input?: unknown }).input;
  if (issue.code === 'invalid_type') {
    const expected = expectedText(issue.expected);
    return input === undefined ? `required (expected ${expected})` : `wrong type: expected ${expected}, got ${shown(input)}`;
  }
  const msg = issue.message.replace(/^Invalid input: /, '');
  return input !== undefined && typeof input !== 'object' ? `${msg} (got ${JSON.stringify(input)})` : msg;
}

/** Every issue as its own line, at most `max`. */
function describeConfigIssues(
  schema: z.ZodType,
  issues: ReadonlyArray<z.core.$ZodIssue>,
  src: IssueSource,
  prefix: Path = [],
  max = 8,
): string[] {
  const lines = issues.flatMap((i) => issueLine(schema, i, prefix, src));
  return lines.length > max ? [...lines.slice(0, max), `... and ${lines.length - max} more`] : lines;
}

/**
 * Validates `value` with `schema` (keys at `prefix` of the whole config) and returns the parsed
 * value, or throws `config_invalid` with one line per problem, each naming the file (or the
 * `--set` flag), the full key path and, for a misspelt key, the nearest valid one.
 */
export function checkConfig<S extends z.ZodType>(schema: S, value: unknown, src: IssueSource, prefix: Path = []): z.infer<S> {
  const r = schema.safeParse(value, { reportInput: true });
  if (r.success) return r.data;
  throw new RaasError('config_invalid', describeConfigIssues(schema, r.error.issues, src, prefix).join('\n'), { retryable: false });
}

/**
 * Runs several checks (the whole config, then the options it hands to nested components) and throws
 * one `config_invalid` error listing the problems of all of them, so one run shows every typo.
 */
export function checkAll(checks: ReadonlyArray<() => unknown>): void {
  const lines: string[] = [];
  for (const c of checks) {
    try {
      c();
    } catch (err) {
      if (!(err instanceof RaasError) || err.code !== 'config_invalid') throw err;
      lines.push(err.message);
    }
  }
  if (lines.length) throw new RaasError('config_invalid', lines.join('\n'), { retryable: false });
}

export function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
