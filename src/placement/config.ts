import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { RaasError } from '../protocol/errors.js';
import { checkConfig } from '../protocol/config-errors.js';
import { LlmApi } from '../protocol/llm.js';

const RolloutServer = z.union([
  z
    .string()
    .min(1)
    .transform((url) => ({ url })),
  z.strictObject({ url: z.string().min(1), token: z.string().optional() }),
]);
const LlmServer = z.union([
  z
    .string()
    .min(1)
    .transform((address) => ({ address })),
  z.strictObject({ address: z.string().min(1), api: LlmApi.optional() }),
]);

/**
 * YAML of `raas place --config`: the rollout servers (URL, optional bearer token) and the LLM
 * servers (address, api). A string is shorthand for `{url}` / `{address}`.
 */
export const PlaceConfig = z.strictObject({
  rollout_servers: z.array(RolloutServer).min(1),
  llm_servers: z.array(LlmServer).min(1),
  /** Default bearer token for rollout servers without their own. */
  token: z.string().optional(),
  weight_version: z.string().max(256).optional(),
  fill_empty: z.boolean().default(true),
  mode: z.enum(['replace', 'sync']).default('replace'),
});
export type PlaceConfig = z.infer<typeof PlaceConfig>;

/** Parses a place config object; errors name the key and what it expects. */
export function parsePlaceConfig(raw: unknown, source = 'config'): PlaceConfig {
  // One line per problem: the file, the full key path, the nearest valid key for a misspelt one.
  const cfg = checkConfig(PlaceConfig, raw ?? {}, { file: source });
  if (cfg.token !== undefined)
    cfg.rollout_servers = cfg.rollout_servers.map((s) => ({ ...s, token: 'token' in s && s.token ? s.token : cfg.token }));
  return cfg;
}

/** Reads and parses a YAML place config. */
export async function loadPlaceConfig(path: string): Promise<PlaceConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new RaasError('config_invalid', `--config ${path}: cannot read it (${(err as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new RaasError('config_invalid', `${path}: not valid YAML: ${(err as Error).message}`);
  }
  return parsePlaceConfig(raw, path);
}
