import { RaasError } from '../protocol/errors.js';
import { getJson, isUnreachable, normalizeAddress, postJson } from '../server/llm/http.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * The probe string raas tokenizes on both sides: words, digits, punctuation, code, whitespace runs,
 * accents and a non-Latin script, so two different vocabularies (or normalisers) disagree on it.
 */
export const TOKENIZER_PROBE =
  'raas tokenizer probe: Hello, world! 12345 + 678 = 13023\n\tdef f(x): return x**2  # déjà vu, naïve café — 你好，世界 🙂 <tool_call>{"name": "bash"}</tool_call>';

/** What the check found. */
export interface TokenizerCheck {
  address: string;
  /** `ids`: the backend tokenized the probe; `model_name`: no tokenize route, names compared; `none`: nothing answered. */
  method: 'ids' | 'model_name' | 'none';
  /** True when the ids (or names) agree; false on a mismatch; undefined when it could not be told. */
  match?: boolean;
  /** The served model's name, when read. */
  model?: string;
  /** Set when the backend could not be verified (it is kept; say why). */
  warning?: string;
  /** On an id mismatch: where the ids first differ. */
  first_difference?: { index: number; ours: number | null; theirs: number | null };
}

/**
 * Checks that a backend tokenizes like raas's tokenizer: POST `/tokenize` with the probe string and
 * `add_special_tokens: false` — vLLM's route (vllm/entrypoints/serve/tokenize/api_router.py@b91ee1b:38,
 * body TokenizeCompletionRequest {model?, prompt, add_special_tokens, return_token_strs},
 * answer TokenizeResponse {count, max_model_len, tokens, token_strs}) and SGLang's (`/tokenize` and
 * `/v1/tokenize`, http_server.py@0025436; serving_tokenize.py@0351c1f answers {tokens, count,
 * max_model_len}) take the same body — and compares the ids. A backend without the route (404, 405,
 * 501) falls back to comparing its served model name with the tokenizer's name (a warning, never a
 * refusal); one that does not answer is not judged (warning). Never throws; `assertTokenizerMatch`
 * turns a mismatch into an error.
 */
export async function checkBackendTokenizer(
  address: string,
  api: 'vllm' | 'sglang',
  tokenizer: Tokenizer,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<TokenizerCheck> {
  const base = normalizeAddress(address);
  const timeoutMs = opts.timeoutMs ?? 2_000;
  let ours: number[];
  try {
    ours = tokenizer.encode(TOKENIZER_PROBE);
  } catch (err) {
    return { address: base, method: 'none', warning: `raas's tokenizer ${tokenizer.name} failed on the probe string: ${String(err)}` };
  }
  try {
    const r = (await postJson(`${base}/tokenize`, { prompt: TOKENIZER_PROBE, add_special_tokens: false }, opts.signal, timeoutMs)) as {
      tokens?: unknown;
    } | null;
    const theirs = r?.tokens;
    if (!Array.isArray(theirs) || !theirs.every((t) => Number.isInteger(t))) {
      return {
        address: base,
        method: 'none',
        warning: `${base}/tokenize answered without a "tokens" list of integers; the tokenizer could not be checked`,
      };
    }
    const i = firstDifference(ours, theirs as number[]);
    if (i < 0) return { address: base, method: 'ids', match: true };
    return {
      address: base,
      method: 'ids',
      match: false,
      first_difference: { index: i, ours: ours[i] ?? null, theirs: (theirs[i] as number | undefined) ?? null },
    };
  } catch (err) {
    if (isUnreachable(err))
      return {
        address: base,
        method: 'none',
        warning: `${base} did not answer the tokenizer check (${(err as Error).message}); it was not verified`,
      };
    const status = (err as Error).message.match(/answered (\d{3})/)?.[1];
    if (status !== '404' && status !== '405' && status !== '501') {
      return {
        address: base,
        method: 'none',
        warning: `${base}/tokenize failed (${(err as Error).message}); the tokenizer was not verified`,
      };
    }
  }
  return byModelName(base, api, tokenizer, timeoutMs, opts.signal);
}

/** The fallback: the served model's name against the tokenizer's (bundled qwen3: any Qwen3 model). */
async function byModelName(
  base: string,
  api: 'vllm' | 'sglang',
  tokenizer: Tokenizer,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<TokenizerCheck> {
  let model: string | undefined;
  try {
    if (api === 'vllm') {
      const r = (await getJson(`${base}/v1/models`, signal, timeoutMs)) as { data?: Array<{ id?: unknown; root?: unknown }> } | null;
      const m = r?.data?.[0];
      model = typeof m?.root === 'string' ? m.root : typeof m?.id === 'string' ? m.id : undefined;
    } else {
      const r = (await getJson(`${base}/get_model_info`, signal, timeoutMs)) as { model_path?: unknown; tokenizer_path?: unknown } | null;
      model = typeof r?.tokenizer_path === 'string' ? r.tokenizer_path : typeof r?.model_path === 'string' ? r.model_path : undefined;
    }
  } catch {
    // reported below
  }
  const no = `${base} has no /tokenize route, so its token ids could not be compared with raas's tokenizer (${tokenizer.name})`;
  if (!model) return { address: base, method: 'none', warning: `${no}, and it did not say which model it serves` };
  const match = namesAgree(model, tokenizer.name);
  return match
    ? {
        address: base,
        method: 'model_name',
        match: true,
        model,
        warning: `${no}; its model "${model}" matches the tokenizer's name, which is all that could be checked`,
      }
    : {
        address: base,
        method: 'model_name',
        match: false,
        model,
        warning: `${no}; it serves "${model}", which does not look like the tokenizer "${tokenizer.name}": set \`tokenizer\` to that model's id (or folder) if its tokenizer differs`,
      };
}

/** Loose name comparison: the bundled `qwen3` matches any Qwen3 model; otherwise the last path parts agree. */
function namesAgree(model: string, tokenizerName: string): boolean {
  const last = (s: string): string => s.replace(/\/+$/, '').split('/').at(-1)!.toLowerCase();
  if (tokenizerName === 'qwen3') return /qwen3/i.test(model);
  return last(model) === last(tokenizerName) || model.toLowerCase() === tokenizerName.toLowerCase();
}

function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** Refuses a backend whose /tokenize ids differ from raas's tokenizer (tokenizer_mismatch, 400). */
function assertTokenizerMatch(c: TokenizerCheck, tokenizer: Tokenizer): void {
  if (c.method !== 'ids' || c.match !== false) return;
  const d = c.first_difference!;
  throw new RaasError(
    'tokenizer_mismatch',
    `backend ${c.address} tokenizes differently from raas's tokenizer "${tokenizer.name}" (probe string, token ${d.index}: raas ${d.ours ?? 'none'}, backend ${d.theirs ?? 'none'}); token ids would be wrong. Set \`tokenizer\` in the server config to the model the backend serves (a Hugging Face id in the local cache, or a folder with tokenizer.json)`,
    { retryable: false },
  );
}

/**
 * The rollout server's gate on backends: checks each address once (a match by ids is remembered, so
 * the re-registrations of every weight update cost nothing) and refuses a mismatch.
 */
export class TokenizerGuard {
  private readonly verified = new Set<string>();

  constructor(
    private readonly tokenizer: () => Tokenizer,
    private readonly timeoutMs = 2_000,
  ) {}

  /** Throws tokenizer_mismatch on a mismatch; otherwise answers what was found (with a warning when unverified). */
  async check(address: string, api: 'vllm' | 'sglang', signal?: AbortSignal): Promise<TokenizerCheck> {
    const base = normalizeAddress(address);
    if (this.verified.has(`${api} ${base}`)) return { address: base, method: 'ids', match: true };
    const tok = this.tokenizer();
    const c = await checkBackendTokenizer(base, api, tok, { timeoutMs: this.timeoutMs, signal });
    assertTokenizerMatch(c, tok);
    if (c.method === 'ids' && c.match) this.verified.add(`${api} ${base}`);
    return c;
  }

  /** A backend removed (or re-pointed): check it again next time. */
  forget(address: string): void {
    const base = normalizeAddress(address);
    for (const k of this.verified) if (k.endsWith(` ${base}`)) this.verified.delete(k);
  }
}
