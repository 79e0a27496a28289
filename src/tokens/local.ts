import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TokenizerLoader } from '@lenml/tokenizers';
import { RaasError } from '../protocol/errors.js';
import { makeTokenizer, type Tokenizer } from './tokenizer.js';

interface TokenizerConfigJson {
  chat_template?: string | Array<{ name: string; template: string }>;
  eos_token?: string | { content: string } | null;
  bos_token?: string | { content: string } | null;
  pad_token?: string | { content: string } | null;
  added_tokens_decoder?: Record<string, { content: string }>;
}

const cache = new Map<string, Tokenizer>();

/**
 * Loads any Hugging Face tokenizer from a local folder holding `tokenizer.json` and
 * `tokenizer_config.json` (through @lenml/tokenizers), with its chat template rendered by
 * @huggingface/jinja. The end-of-turn id is the config's `eos_token`; pad/endoftext also stop.
 */
export function loadTokenizer(dir: string): Tokenizer {
  const abs = path.resolve(dir);
  const hit = cache.get(abs);
  if (hit) return hit;
  const read = (file: string): unknown => {
    try {
      return JSON.parse(readFileSync(path.join(abs, file), 'utf8'));
    } catch (err) {
      throw new RaasError(
        'config_invalid',
        `tokenizer: cannot read ${path.join(abs, file)} (${(err as Error).message}); point the tokenizer path at a folder with tokenizer.json and tokenizer_config.json`,
        { cause: err },
      );
    }
  };
  const json = read('tokenizer.json') as Record<string, unknown>;
  const config = read('tokenizer_config.json') as TokenizerConfigJson;
  const template = Array.isArray(config.chat_template)
    ? (config.chat_template.find((t) => t.name === 'default')?.template ?? config.chat_template[0]?.template)
    : config.chat_template;
  if (!template)
    throw new RaasError('config_invalid', `tokenizer: ${abs}/tokenizer_config.json has no chat_template; add one (a Jinja string)`);
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: json as never, tokenizerConfig: config as never }) as unknown as {
    encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
    decode(ids: number[], opts?: { skip_special_tokens?: boolean }): string;
  };
  const text = (t: TokenizerConfigJson['eos_token']): string | undefined => (t == null ? undefined : typeof t === 'string' ? t : t.content);
  const idOf = (content: string | undefined): number | undefined => {
    if (content === undefined) return undefined;
    const ids = tok.encode(content, { add_special_tokens: false });
    return ids.length === 1 ? ids[0] : undefined;
  };
  const eosToken = text(config.eos_token);
  const eosId = idOf(eosToken);
  if (eosId === undefined)
    throw new RaasError(
      'config_invalid',
      `tokenizer: eos_token ${JSON.stringify(eosToken)} of ${abs} is not one token; set eos_token in tokenizer_config.json`,
    );
  const stopIds = [eosId];
  const pad = idOf(text(config.pad_token));
  if (pad !== undefined && pad !== eosId) stopIds.push(pad);
  const t: Tokenizer = {
    ...makeTokenizer(path.basename(abs), tok, template, { eosId, stopIds, bosToken: text(config.bos_token), eosToken }),
    source: { kind: 'folder', dir: abs },
  };
  cache.set(abs, t);
  return t;
}
