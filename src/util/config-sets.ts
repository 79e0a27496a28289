import { parse as parseYaml } from 'yaml';
import { RaasError } from '../protocol/errors.js';
import { isMapping } from '../protocol/config-errors.js';
import { resolveConfigPaths, type PathKey } from '../protocol/config-paths.js';

/** One `--set key.path=value` assignment: the path, and the value parsed as a YAML scalar (or flow collection). */
export interface SetAssignment {
  path: string[];
  value: unknown;
  text: string;
}

/** Parses `--set` texts; a malformed one throws naming the flag. */
export function parseSets(texts: readonly string[] = []): SetAssignment[] {
  return texts.map((text) => {
    const eq = text.indexOf('=');
    const key = eq < 0 ? '' : text.slice(0, eq).trim();
    if (eq < 0 || !/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(key)) {
      throw new RaasError('config_invalid', `--set ${text}: expected key.path=value (for example --set sampling_params.temperature=0.7)`, {
        retryable: false,
      });
    }
    const raw = text.slice(eq + 1);
    let value: unknown;
    try {
      value = raw.trim() === '' ? '' : parseYaml(raw);
    } catch (err) {
      throw new RaasError('config_invalid', `--set ${text}: the value is not a YAML scalar: ${(err as Error).message.split('\n')[0]}`, {
        retryable: false,
      });
    }
    return { path: key.split('.'), value, text };
  });
}

/** Writes each assignment into a copy of `doc` (creating mappings on the way; a scalar on the way is replaced). */
export function applySets(doc: unknown, sets: readonly SetAssignment[]): Record<string, unknown> {
  const root: Record<string, unknown> = structuredClone(isMapping(doc) ? doc : {});
  for (const s of sets) {
    let at: Record<string, unknown> = root;
    s.path.slice(0, -1).forEach((k) => {
      if (!isMapping(at[k])) at[k] = {};
      at = at[k] as Record<string, unknown>;
    });
    at[s.path.at(-1)!] = s.value;
  }
  return root;
}

/**
 * `--set` values of path keys resolved against `base` (the working directory: a path typed on the
 * command line is relative to where it was typed), whatever depth the assignment writes at.
 */
export function resolveSetPaths(sets: readonly SetAssignment[], base: string, keys: readonly PathKey[]): SetAssignment[] {
  return sets.map((s) => {
    let at: unknown = resolveConfigPaths(applySets({}, [s]), base, keys);
    for (const k of s.path) at = isMapping(at) ? at[k] : undefined;
    return { ...s, value: at };
  });
}
