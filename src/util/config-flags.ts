import { InvalidArgumentError } from 'commander';

/**
 * Commander argument parsers whose errors name the flag and what it takes: `--n: must be a
 * positive integer, got "-2"`. src/cli.ts prints them as `raas: <message>`.
 */
export function intArg(flag: string, range: { min?: number; max?: number } = {}): (v: string) => number {
  const { min, max } = range;
  const what =
    min !== undefined && max !== undefined
      ? `expected an integer ${min}–${max}`
      : min === 1
        ? 'must be a positive integer'
        : min === 0
          ? 'must be an integer >= 0'
          : 'expected an integer';
  return (v) => {
    const n = /^[+-]?\d+$/.test(v.trim()) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || (min !== undefined && n < min) || (max !== undefined && n > max))
      throw new InvalidArgumentError(`${flag}: ${what}, got "${v}"`);
    return n;
  };
}

/** A TCP port, 0 (pick a free one) to 65535. */
export const portArg = (flag: string): ((v: string) => number) => intArg(flag, { min: 0, max: 65_535 });

/** A finite number, optionally > 0 or >= 0. */
export function numberArg(flag: string, opts: { positive?: boolean; nonNegative?: boolean } = {}): (v: string) => number {
  const what = opts.positive ? 'must be a number > 0' : opts.nonNegative ? 'must be a number >= 0' : 'expected a number';
  return (v) => {
    const n = v.trim() === '' ? Number.NaN : Number(v);
    if (!Number.isFinite(n) || (opts.positive && n <= 0) || (opts.nonNegative && n < 0))
      throw new InvalidArgumentError(`${flag}: ${what}, got "${v}"`);
    return n;
  };
}

/**
 * Repeatable `--set key.path=value`: collects every occurrence. A value without `=` is refused at
 * once with the form it likely meant: `--set n 8` (a space instead of `=`) suggests `--set n=8`.
 */
export function collect(v: string, previous: string[] = [], argv: readonly string[] = process.argv): string[] {
  if (!v.includes('=')) throw new InvalidArgumentError(`--set: expected key.path=value, got "${v}"; ${setHint(v, argv)}`);
  return [...previous, v];
}

/** The `--set` a user meant when they wrote `--set key value` (or `--set key`). */
function setHint(key: string, argv: readonly string[]): string {
  const i = argv.findIndex((a, j) => a === key && j > 0 && argv[j - 1] === '--set');
  const next = i >= 0 ? argv[i + 1] : undefined;
  const example = next !== undefined && !next.startsWith('-') ? `--set ${key}=${next}` : `--set ${key}=<value>`;
  return `write it as one word with "=": ${example}`;
}

/** The help text of `--set`, with an example key of the command's own config. */
export function setHelp(example: string): string {
  return `override one config key, typed through the schema: --set ${example} (repeatable; the value is read as YAML)`;
}

/** Rewrites commander's "error: option '--n <n>' argument '-2' is invalid. --n: ..." to the message alone. */
export function flagErrorLine(text: string, argv: readonly string[] = process.argv): string {
  const m = /^error: option '(?:-\w, )?(--[\w-]+)[^']*' argument '([^']*)' is invalid\. (.*)$/s.exec(text.trim());
  if (!m) return text.replace(/^error: /, 'raas: ') + argumentHint(text, argv);
  const [, flag, value, why] = m;
  // Our parsers' messages start with the flag; commander's own (choices) do not.
  return why!.startsWith(`${flag}:`) ? `raas: ${why}\n` : `raas: ${flag}: ${why!.replace(/\.$/, '')}, got "${value}"\n`;
}

/**
 * The form a user likely meant for a misplaced config file: `raas serve configs/server.yaml` (serve,
 * sim-llm, place and sidecar take `--config`). Empty when nothing fits.
 */
function argumentHint(text: string, argv: readonly string[]): string {
  const m = /too many arguments for '([\w-]+)'/.exec(text);
  const file = argv.slice(2).find((a) => /\.(ya?ml|json)$/i.test(a) && !a.startsWith('-'));
  if (!m || !file || argv.includes('--config') || argv.includes('-c')) return '';
  return `(raas ${m[1]} takes its config file as a flag: raas ${m[1]} --config ${file})\n`;
}
