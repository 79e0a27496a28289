import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { isMapping } from './config-errors.js';

/**
 * How a path key is read:
 * - `path`: a file or folder;
 * - `command`: an executable; a bare name (`bwrap`, `python3`) is looked up on PATH and kept as it is;
 * - `tokenizer`: `qwen3`, a folder, or a Hugging Face model id (`org/name`); only an existing folder
 *   is a path (the rule of src/tokens/resolve.ts, where a folder wins over an id of the same spelling).
 */
type PathKind = 'path' | 'command' | 'tokenizer';

/** A key path (`a.b`, `list[]` for every element, `list[].key` for a key of every element) and its kind. */
export type PathKey = readonly [key: string, kind: PathKind];

/** Every path key of the simulator's options (`raas sim-llm --config`, `embedded.sim`). */
export const SIM_PATH_KEYS: readonly PathKey[] = [
  ['datasets[]', 'path'],
  ['policies[]', 'path'],
  ['tokenizer', 'tokenizer'],
];

/** Every path key of the `sandbox:` section. */
const SANDBOX_PATH_KEYS: readonly PathKey[] = [
  ['root', 'path'],
  ['bwrap', 'command'],
  ['node', 'command'],
  ['python', 'command'],
  ['ro_binds[]', 'path'],
  ['data_dirs[]', 'path'],
  ['leases.file', 'path'],
  ['image_roots.cache_dir', 'path'],
  ['apptainer.binary', 'command'],
  // An image name from `images` is kept like a bare command name; `x.sif` or `dir/x.sif` is a file.
  ['apptainer.image', 'command'],
];

/** Every path key of a rollout server's config (`raas serve --config`, `embedded.server`). */
export const SERVER_PATH_KEYS: readonly PathKey[] = [
  ['token_file', 'path'],
  ['tenants[].token_file', 'path'],
  ['join.token_file', 'path'],
  ['handler_modules[]', 'path'],
  ['journal.dir', 'path'],
  ['tokenizer', 'tokenizer'],
  ['handlers.swe.repos_dir', 'path'],
  ['handlers.swe.images_dir', 'path'],
  ...under('sandbox', SANDBOX_PATH_KEYS),
];

/**
 * Every path key of a training config (`raas train`, `raas eval`, `raas sidecar`). `output_dir`
 * is one when the file sets it; its default (`runs`) stays in the working directory.
 */
export const TRAIN_PATH_KEYS: readonly PathKey[] = [
  ['dataset.path', 'path'],
  ['eval.dataset.path', 'path'],
  ['eval.output', 'path'],
  ['output_dir', 'path'],
  ['trainer.cwd', 'path'],
  ['servers[].token_file', 'path'],
  // `servers: {registry: url, token_file}`
  ['servers.token_file', 'path'],
  ...under('embedded.sim', SIM_PATH_KEYS),
  ...under('embedded.server', SERVER_PATH_KEYS),
];

function under(prefix: string, keys: readonly PathKey[]): PathKey[] {
  return keys.map(([k, kind]) => [`${prefix}.${k}`, kind]);
}

/** One value resolved against `base`, as its kind says; anything but a string is left for the schema to judge. */
function resolveValue(value: unknown, kind: PathKind, base: string): unknown {
  if (typeof value !== 'string' || value === '') return value;
  if (path.isAbsolute(value)) return value;
  if (kind === 'command' && !value.includes('/') && !value.endsWith('.sif')) return value;
  if (kind === 'tokenizer') {
    if (value === 'qwen3') return value;
    const dir = path.resolve(base, value);
    const isDir = existsSync(dir) && statSync(dir).isDirectory();
    // A model id stays an id unless a folder of that name is there (or the text can only be a path).
    if (!isDir && !value.startsWith('.')) return value;
    return dir;
  }
  return path.resolve(base, value);
}

/** Resolves the value at `segments` (with `[]` steps) in place inside `node`. */
function walk(node: unknown, segments: readonly string[], kind: PathKind, base: string): void {
  if (!isMapping(node) || segments.length === 0) return;
  const [head, ...rest] = segments;
  const each = head!.endsWith('[]');
  const key = each ? head!.slice(0, -2) : head!;
  if (!Object.hasOwn(node, key)) return;
  const value = node[key];
  if (each) {
    if (!Array.isArray(value)) return;
    if (rest.length === 0) node[key] = value.map((v) => resolveValue(v, kind, base));
    else for (const v of value) walk(v, rest, kind, base);
  } else if (rest.length === 0) node[key] = resolveValue(value, kind, base);
  else walk(value, rest, kind, base);
}

/**
 * A copy of a config document whose relative paths (the `keys`) are resolved against `base`: the
 * folder of the file they were written in, so a config works from any working directory.
 */
export function resolveConfigPaths(doc: Record<string, unknown>, base: string, keys: readonly PathKey[]): Record<string, unknown> {
  const out = structuredClone(doc);
  for (const [key, kind] of keys) walk(out, key.split('.'), kind, base);
  return out;
}
