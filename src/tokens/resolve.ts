import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RaasError } from '../protocol/errors.js';
import { loadTokenizer } from './local.js';
import { qwen3Tokenizer, type Tokenizer } from './tokenizer.js';

/** Where a `tokenizer` setting was found. */
export interface TokenizerSource {
  kind: 'bundled' | 'folder' | 'hf_cache';
  /** The folder read (absent for the bundled one). */
  dir?: string;
  /** The Hugging Face model id, for `hf_cache`. */
  model_id?: string;
}

/**
 * The Hugging Face hub cache directory, as huggingface_hub resolves it: `HF_HUB_CACHE`, else
 * `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
 */
export function hfHubCache(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  if (env.HF_HOME) return path.join(env.HF_HOME, 'hub');
  const base = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'huggingface', 'hub');
}

const HF_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

/**
 * The snapshot folder of `modelId` in the local hub cache (`models--org--name/snapshots/<rev>/`)
 * holding a tokenizer.json: the revision `refs/<revision>` names (default `main`), else the most
 * recently written snapshot that has one. Nothing is downloaded. Undefined when absent.
 */
function findInHfCache(modelId: string, opts: { cache?: string; revision?: string } = {}): string | undefined {
  const repo = path.join(opts.cache ?? hfHubCache(), `models--${modelId.replace(/\//g, '--')}`);
  const snaps = path.join(repo, 'snapshots');
  if (!existsSync(snaps)) return undefined;
  const has = (dir: string): boolean => existsSync(path.join(dir, 'tokenizer.json'));
  const ref = path.join(repo, 'refs', opts.revision ?? 'main');
  if (existsSync(ref)) {
    const dir = path.join(snaps, readFileSync(ref, 'utf8').trim());
    if (has(dir)) return dir;
  }
  if (opts.revision && existsSync(path.join(snaps, opts.revision)) && has(path.join(snaps, opts.revision)))
    return path.join(snaps, opts.revision);
  const candidates = readdirSync(snaps)
    .map((d) => path.join(snaps, d))
    .filter(has);
  candidates.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  return candidates[0];
}

/**
 * Where the `tokenizer` setting points: `qwen3` (bundled), a folder with tokenizer.json and
 * tokenizer_config.json (relative to `baseDir`), or a Hugging Face model id (`org/name`, optionally
 * `org/name@revision`) found in the local hub cache. A folder wins over an id of the same spelling.
 */
export function locateTokenizer(spec: string, baseDir = process.cwd(), env: NodeJS.ProcessEnv = process.env): TokenizerSource {
  if (spec === 'qwen3') return { kind: 'bundled' };
  const dir = path.resolve(baseDir, spec);
  if (existsSync(dir) && statSync(dir).isDirectory()) return { kind: 'folder', dir };
  const [id, revision] = spec.split('@') as [string, string | undefined];
  if (HF_ID.test(id) && !spec.startsWith('.')) {
    const cache = hfHubCache(env);
    const found = findInHfCache(id, { cache, revision });
    if (found) return { kind: 'hf_cache', dir: found, model_id: id };
    throw new RaasError(
      'config_invalid',
      `tokenizer: "${spec}" is not a folder (${dir}) and not in the local Hugging Face cache (${path.join(cache, `models--${id.replace(/\//g, '--')}`)}, from HF_HUB_CACHE / HF_HOME / ~/.cache/huggingface/hub); raas never downloads: fetch it with \`huggingface-cli download ${id} tokenizer.json tokenizer_config.json\`, give a folder, or use "qwen3" (bundled)`,
    );
  }
  throw new RaasError(
    'config_invalid',
    `tokenizer: no folder ${dir}; give "qwen3" (bundled), a folder with tokenizer.json and tokenizer_config.json, or a Hugging Face model id (org/name) in the local cache`,
  );
}

/** Loads the tokenizer a `tokenizer` setting names (see locateTokenizer); a Hugging Face id keeps its id as the tokenizer's name. */
export function resolveTokenizerSpec(spec: string, baseDir = process.cwd(), env: NodeJS.ProcessEnv = process.env): Tokenizer {
  const src = locateTokenizer(spec, baseDir, env);
  if (src.kind === 'bundled') return qwen3Tokenizer();
  const tok = loadTokenizer(src.dir!);
  // The methods are closures over the loaded tokenizer, so a copy with another name still works.
  return src.model_id ? { ...tok, name: src.model_id } : tok;
}
