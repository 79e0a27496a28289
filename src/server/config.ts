import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { RaasError } from '../protocol/errors.js';
import { ServerConfig, type ServerConfigInput } from '../protocol/config-server.js';
import { checkAll, checkConfig } from '../protocol/config-errors.js';
import { applySets, parseSets, resolveSetPaths } from '../util/config-sets.js';
import { SERVER_PATH_KEYS, resolveConfigPaths } from '../protocol/config-paths.js';
import { SandboxConfig } from '../protocol/config-sandbox.js';
import { resolveToken } from '../util/secret.js';

/** Deep-merges plain objects; arrays and scalars of `over` replace those of `base`. */
function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) continue;
    const b = out[k];
    out[k] = isPlain(b) && isPlain(v) ? merge(b, v) : v;
  }
  return out;
}

function isPlain(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Loads `raas serve --config` YAML (optional), applies CLI overrides, and validates with the
 * ServerConfig schema (every field defaulted). Errors name the key and the file.
 */
export async function loadServerConfig(
  file: string | undefined,
  overrides: ServerConfigInput = {},
  sets: readonly string[] = [],
): Promise<{ config: ServerConfig; baseDir: string }> {
  const assignments = parseSets(sets);
  let fromFile: Record<string, unknown> = {};
  const baseDir = file ? path.dirname(path.resolve(file)) : process.cwd();
  if (file) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new RaasError('config_invalid', `--config ${file}: cannot read it (${(err as Error).message})`, { cause: err });
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(text);
    } catch (err) {
      throw new RaasError('config_invalid', `--config ${file}: not valid YAML: ${(err as Error).message}`, { cause: err });
    }
    if (parsed !== null && parsed !== undefined && !isPlain(parsed))
      throw new RaasError('config_invalid', `--config ${file}: expected a mapping of settings at the top level`);
    // Paths written in the file are relative to its folder (SERVER_PATH_KEYS), wherever the server is started.
    fromFile = resolveConfigPaths((parsed as Record<string, unknown>) ?? {}, baseDir, SERVER_PATH_KEYS);
  }
  // One line per problem: the file (or the --set flag), the full key path, the nearest valid key.
  const src = { file: file ?? 'raas serve', sets: assignments };
  // --set paths are relative to the working directory, where they were typed.
  const doc = applySets(
    merge(fromFile, overrides as Record<string, unknown>),
    resolveSetPaths(assignments, process.cwd(), SERVER_PATH_KEYS),
  );
  let config: ServerConfig | undefined;
  checkAll([
    () => (config = checkConfig(ServerConfig, doc, src)),
    // The sandbox section is the sandbox runtime's (checked again when the first sandbox opens): checked now too.
    () => isPlain(doc.sandbox) && checkConfig(SandboxConfig, doc.sandbox, src, ['sandbox']),
  ]);
  return { config: withToken(config!, baseDir), baseDir };
}

/** Reads `token_file` / `token_env` into `token`, so no secret has to be passed on a command line. */
function withToken(config: ServerConfig, baseDir: string): ServerConfig {
  if (config.token_file === undefined && config.token_env === undefined) return config;
  const { token_file, token_env, ...rest } = config;
  const file = token_file === undefined ? undefined : path.resolve(baseDir, token_file);
  const token = resolveToken({ token: config.token, token_file: file, token_env }, 'token');
  if (token !== undefined && token.length < 8)
    throw new RaasError('config_invalid', 'token: must be at least 8 characters (from token_file / token_env)', { retryable: false });
  return { ...rest, token };
}
