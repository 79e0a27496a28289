import { afterAll, describe, expect, it } from 'vitest';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startRolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { TOKENIZER_PROBE, checkBackendTokenizer } from '../../src/tokens/backend-check.js';
import { hfHubCache, locateTokenizer, resolveTokenizerSpec } from '../../src/tokens/resolve.js';
import { loadTokenizer } from '../../src/tokens/local.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';

const FIXTURE = path.join(path.dirname(new URL(import.meta.url).pathname), 'fixtures', 'tiny-bpe');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-tok-'));
const sims: SimHandle[] = [];
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});
const sim = async (o: Parameters<typeof startSim>[0] = {}): Promise<SimHandle> => {
  const s = await startSim(o);
  sims.push(s);
  return s;
};

/** A hub cache laid out as huggingface_hub writes it: blobs, a snapshot of symlinks, refs/main. */
function fakeHubCache(root: string, id: string, rev: string): string {
  const repo = path.join(root, `models--${id.replace('/', '--')}`);
  mkdirSync(path.join(repo, 'blobs'), { recursive: true });
  mkdirSync(path.join(repo, 'snapshots', rev), { recursive: true });
  mkdirSync(path.join(repo, 'refs'), { recursive: true });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    copyFileSync(path.join(FIXTURE, f), path.join(repo, 'blobs', `sha-${f}`));
    symlinkSync(path.join('..', '..', 'blobs', `sha-${f}`), path.join(repo, 'snapshots', rev, f));
  }
  writeFileSync(path.join(repo, 'refs', 'main'), rev);
  return path.join(repo, 'snapshots', rev);
}

describe('the tokenizer setting', () => {
  it('resolves a Hugging Face model id from the local hub cache (HF_HUB_CACHE, HF_HOME), never downloading', () => {
    const home = path.join(dir, 'hf-home');
    const snap = fakeHubCache(path.join(home, 'hub'), 'acme/tiny-model', 'abc123');
    expect(hfHubCache({ HF_HOME: home })).toBe(path.join(home, 'hub'));
    expect(hfHubCache({ HF_HUB_CACHE: '/x', HF_HOME: home })).toBe('/x');
    expect(hfHubCache({ HOME: '/h' }).endsWith(path.join('.cache', 'huggingface', 'hub'))).toBe(true);
    expect(locateTokenizer('acme/tiny-model', dir, { HF_HOME: home })).toEqual({
      kind: 'hf_cache',
      dir: snap,
      model_id: 'acme/tiny-model',
    });
    const tok = resolveTokenizerSpec('acme/tiny-model', dir, { HF_HOME: home });
    expect(tok.name).toBe('acme/tiny-model');
    expect(tok.encode('hello world')).toEqual(loadTokenizer(FIXTURE).encode('hello world'));
    expect(locateTokenizer('qwen3')).toEqual({ kind: 'bundled' });
    expect(locateTokenizer(FIXTURE)).toEqual({ kind: 'folder', dir: FIXTURE });
  });

  it('names the cache it looked in and the fix when the id is not there', () => {
    const home = path.join(dir, 'empty-home');
    expect(() => locateTokenizer('meta-llama/Llama-3.1-8B', dir, { HF_HOME: home })).toThrow(
      /"meta-llama\/Llama-3.1-8B" is not a folder .* not in the local Hugging Face cache \(.*empty-home\/hub\/models--meta-llama--Llama-3.1-8B.*huggingface-cli download meta-llama\/Llama-3.1-8B/,
    );
    expect(() => locateTokenizer('./no/such/dir', dir)).toThrow(/no folder .*no\/such\/dir/);
  });
});

describe("the simulator's tokenize routes (vLLM /tokenize, SGLang /v1/tokenize)", () => {
  it("answer the ids of its tokenizer in each server's shape", async () => {
    const s = await sim();
    const ids = qwen3Tokenizer().encode(TOKENIZER_PROBE);
    const post = (p: string, body: unknown) =>
      fetch(`${s.url}${p}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const v = await (await post('/tokenize', { model: 'Qwen/Qwen3-8B', prompt: TOKENIZER_PROBE, add_special_tokens: false })).json();
    expect(v).toEqual({ count: ids.length, max_model_len: 40960, tokens: ids, token_strs: null });
    const strs = await (await post('/tokenize', { prompt: 'hi there', return_token_strs: true })).json();
    expect(strs.token_strs.join('')).toBe('hi there');
    const chat = await (await post('/tokenize', { messages: [{ role: 'user', content: 'hi' }] })).json();
    expect(chat.tokens).toEqual(qwen3Tokenizer().encode(qwen3Tokenizer().renderText([{ role: 'user', content: 'hi' }])));
    const g = await (await post('/v1/tokenize', { prompt: ['a b', 'c'] })).json();
    expect(g).toEqual({
      tokens: [qwen3Tokenizer().encode('a b'), qwen3Tokenizer().encode('c')],
      count: [qwen3Tokenizer().encode('a b').length, 1],
      max_model_len: 40960,
    });
    const bad = await post('/tokenize', { prompt: 3 });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ type: 'BadRequestError', code: 400 });
    const none = await sim({ tokenize_route: false });
    expect(
      (await fetch(`${none.url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt":"x"}' }))
        .status,
    ).toBe(404);
  });
});

describe("raas checks each backend's tokenizer against its own", () => {
  it('checkBackendTokenizer: ids agree, ids differ, no route (served model name), no answer', async () => {
    const q = qwen3Tokenizer();
    expect(await checkBackendTokenizer((await sim()).url, 'vllm', q)).toMatchObject({ method: 'ids', match: true });
    const off = await checkBackendTokenizer((await sim({ tokenize_perturb: 7 })).url, 'sglang', q);
    expect(off).toMatchObject({ method: 'ids', match: false, first_difference: { index: 0 } });
    const old = await checkBackendTokenizer((await sim({ tokenize_route: false })).url, 'vllm', q);
    expect(old).toMatchObject({ method: 'model_name', match: true, model: 'Qwen/Qwen3-8B' });
    expect(old.warning).toMatch(/no \/tokenize route/);
    const llama = await checkBackendTokenizer((await sim({ tokenize_route: false, model: 'meta-llama/Llama-3.1-8B' })).url, 'sglang', q);
    expect(llama).toMatchObject({ method: 'model_name', match: false, model: 'meta-llama/Llama-3.1-8B' });
    expect(llama.warning).toMatch(/does not look like the tokenizer "qwen3"/);
    const dead = await checkBackendTokenizer('http://127.0.0.1:9', 'vllm', q, { timeoutMs: 500 });
    expect(dead).toMatchObject({ method: 'none' });
    expect(dead.match).toBeUndefined();
  });

  it('add_llm_server refuses a backend that tokenizes differently (400 tokenizer_mismatch, nothing registered) and reports the check otherwise', async () => {
    const server = await startRolloutServer({ port: 0, log_level: 'silent' });
    try {
      const add = (body: unknown) =>
        fetch(`${server.url}/add_llm_server`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const other = await sim({ tokenizer: FIXTURE }); // a real, different tokenizer
      const r = await add({ address: other.url });
      expect(r.status).toBe(400);
      const e = await r.json();
      expect(e.error.code).toBe('tokenizer_mismatch');
      expect(e.error.message).toMatch(
        new RegExp(`backend ${other.url} tokenizes differently from raas's tokenizer "qwen3" .*Set \`tokenizer\``),
      );
      expect((await (await fetch(`${server.url}/status`)).json()).backends).toEqual([]);
      const perturbed = await add({ address: (await sim({ tokenize_perturb: 1 })).url, api: 'sglang' });
      expect(perturbed.status).toBe(400);
      const ok = await (await add({ address: (await sim()).url })).json();
      expect(ok.tokenizer).toMatchObject({ method: 'ids', match: true });
      const old = await (await add({ address: (await sim({ tokenize_route: false })).url })).json();
      expect(old.status).toBe('ok');
      expect(old.tokenizer).toMatchObject({ method: 'model_name', match: true });
    } finally {
      await server.close();
    }
  });

  it('raas serve refuses to start with a configured backend whose tokenizer differs', async () => {
    const off = await sim({ tokenize_perturb: 3 });
    await expect(
      startRolloutServer({ port: 0, log_level: 'silent', llm: { backends: [{ address: off.url }] } } as never),
    ).rejects.toMatchObject({ code: 'tokenizer_mismatch' });
    // The same backend with the tokenizer it serves: accepted.
    const tiny = await sim({ tokenizer: FIXTURE });
    const s = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      tokenizer: FIXTURE,
      llm: { backends: [{ address: tiny.url }] },
    } as never);
    await s.close();
  });
});
