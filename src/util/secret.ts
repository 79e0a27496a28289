import { readFileSync, statSync } from 'node:fs';
import { RaasError } from '../protocol/errors.js';

/** Where a bearer token comes from: given inline, read from a file, or from an environment variable. */
export interface TokenSource {
  token?: string;
  /** A file holding the token (surrounding whitespace trimmed); it must not be readable by group or others. */
  token_file?: string;
  /** The name of an environment variable holding the token. */
  token_env?: string;
}

/**
 * Resolves a bearer token without it ever appearing on a command line: a token on a command line is
 * visible to every user of a shared node through `ps`, while a 0600 file or the process's own
 * environment (`/proc/<pid>/environ` is readable only by its owner) is not. `what` names the config
 * key in errors. At most one of the three may be given.
 */
export function resolveToken(src: TokenSource, what: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const given = (['token', 'token_file', 'token_env'] as const).filter((k) => src[k] !== undefined);
  if (given.length > 1)
    throw new RaasError('config_invalid', `${what}: give one of token, token_file, token_env (got ${given.join(' and ')})`, {
      retryable: false,
    });
  if (src.token !== undefined) return src.token;
  if (src.token_env !== undefined) {
    const v = env[src.token_env];
    if (v === undefined || v.trim() === '') {
      throw new RaasError(
        'config_invalid',
        `${what}.token_env: the environment variable ${src.token_env} is not set or empty; export it before starting raas`,
        { retryable: false },
      );
    }
    return v.trim();
  }
  if (src.token_file !== undefined) return readTokenFile(src.token_file, `${what}.token_file`);
  return undefined;
}

/** Reads a token file, refusing one that group or others can read (as ssh refuses such a key). */
function readTokenFile(file: string, what: string): string {
  let mode: number;
  let text: string;
  try {
    mode = statSync(file).mode;
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new RaasError('config_invalid', `${what}: cannot read ${file} (${(err as Error).message})`, { cause: err, retryable: false });
  }
  if ((mode & 0o077) !== 0) {
    throw new RaasError(
      'config_invalid',
      `${what}: ${file} is readable by other users (mode ${(mode & 0o777).toString(8)}); run chmod 600 ${file}`,
      { retryable: false },
    );
  }
  const token = text.trim();
  if (token === '') throw new RaasError('config_invalid', `${what}: ${file} is empty`, { retryable: false });
  return token;
}
