import { isMapping, nearestKey } from './config-errors.js';
import { PROCESS_KEYS, SamplingParams } from './process.js';

/** A key of a /process body that the server does not read, and the nearest one it does. */
export interface UnknownKey {
  /** `bogus` (top level) or `sampling_params.temprature`. */
  path: string;
  near?: string;
}

const SAMPLING_KEYS: ReadonlySet<string> = new Set(Object.keys(SamplingParams.shape));

/**
 * The keys of a /process body that raas ignores: top-level keys outside ProRL's request model and
 * ours, and sampling parameters it neither reads nor forwards (send those in `extra_body`). The
 * instance's keys are its handler's to judge. ProRL's own clients send such keys, so they are only
 * refused in strict mode (docs/api.md).
 */
export function unknownProcessKeys(body: unknown): UnknownKey[] {
  if (!isMapping(body)) return [];
  const out: UnknownKey[] = [];
  for (const k of Object.keys(body)) if (!PROCESS_KEYS.has(k)) out.push({ path: k, near: nearestKey(k, PROCESS_KEYS) });
  if (isMapping(body.sampling_params))
    for (const k of Object.keys(body.sampling_params))
      if (!SAMPLING_KEYS.has(k)) {
        const near = nearestKey(k, SAMPLING_KEYS);
        out.push({ path: `sampling_params.${k}`, near: near && `sampling_params.${near}` });
      }
  return out;
}

/** One key as a message names it: "`x`" plus "did you mean `y`?" when one is close. */
export function describeUnknownKey(k: UnknownKey): string {
  return `\`${k.path}\`${k.near ? ` (did you mean \`${k.near}\`?)` : ''}`;
}

/**
 * RFC 7234's `Warning` header value for ignored keys (code 299, "miscellaneous persistent warning"):
 * printable ASCII only, at most 5 keys named, each cut at 64 characters.
 */
export function warningHeader(keys: readonly UnknownKey[]): string {
  const safe = (s: string): string =>
    s
      .replace(/[^\x20-\x7e]/g, '?')
      .replace(/["\\]/g, "'")
      .slice(0, 64);
  const named = keys.slice(0, 5).map((k) => `${safe(k.path)}${k.near ? ` (did you mean ${safe(k.near)}?)` : ''}`);
  const more = keys.length > 5 ? ` and ${keys.length - 5} more` : '';
  return `299 raas "ignored unknown key${keys.length > 1 ? 's' : ''}: ${named.join(', ')}${more}"`;
}
