import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keysAt, levenshtein, nearestKey } from '../../src/protocol/config-errors.js';
import { applySets, parseSets } from '../../src/util/config-sets.js';
import { TrainConfig } from '../../src/protocol/config-train.js';
import { loadTrainConfig, parseTrainConfig } from '../../src/dapo/config.js';
import { loadServerConfig } from '../../src/server/config.js';
import { parsePlaceConfig } from '../../src/placement/config.js';
import { readSimConfig } from '../../src/sim/cli.js';

const dir = mkdtempSync(path.join(tmpdir(), 'raas-config-msg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The message of the config_invalid error `fn` throws (fails the test when it throws nothing or something else). */
async function messageOf(fn: () => unknown): Promise<string> {
  try {
    await fn();
  } catch (err) {
    expect((err as { code?: string }).code).toBe('config_invalid');
    return (err as Error).message;
  }
  throw new Error('no error thrown');
}

function file(name: string, text: string): string {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  return f;
}

const base = 'dataset: {path: d.jsonl}\n';

describe('the nearest valid key', () => {
  it('is the closest key within a third of the length (at least 2 edits)', () => {
    expect(levenshtein('boost_per_upate', 'boost_per_update')).toBe(1);
    expect(levenshtein('', 'abc')).toBe(3);
    expect(nearestKey('temprature', ['temperature', 'top_p'])).toBe('temperature');
    expect(nearestKey('wrkers', ['workers', 'timeout_s'])).toBe('workers');
    expect(nearestKey('Batch_Size', ['batch_size'])).toBe('batch_size');
    expect(nearestKey('zzz', ['temperature', 'top_p'])).toBeUndefined();
  });

  it('is looked up through defaults, unions, arrays and nested objects', () => {
    expect(keysAt(TrainConfig, ['embedded'])).toEqual(expect.arrayContaining(['servers', 'backends', 'api', 'sim', 'server']));
    expect(keysAt(TrainConfig, ['backends', 0])).toEqual(['address', 'api']);
    expect(keysAt(TrainConfig, ['overlong'])).toEqual(['enabled', 'max_tokens', 'buffer', 'penalty_factor']);
    expect(keysAt(TrainConfig, ['name'])).toBeUndefined();
  });
});

describe('train, eval and sidecar configs (loadTrainConfig): one line per problem, at every depth, before anything starts', () => {
  it('names the file, the full key path and the nearest valid key at each depth', async () => {
    const f = file(
      'typos.yaml',
      [
        'nmae: x',
        'dataset: {path: d.jsonl, shufle: false}',
        'embedded:',
        '  sim: {boost_per_upate: 0.1, latency: {decode_ms_per_tokn: 1}}',
        '  server: {wrkers: {run: 2}, sandbox: {disk_mbb: 10}}',
        'sampling_params: {temprature: 1.0}',
      ].join('\n'),
    );
    const lines = (await messageOf(() => loadTrainConfig(f))).split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        `${f}: \`nmae\`: unknown key; did you mean \`name\`?`,
        `${f}: \`dataset.shufle\`: unknown key; did you mean \`shuffle\`?`,
        `${f}: \`sampling_params.temprature\`: unknown key; did you mean \`temperature\`?`,
        `${f}: \`embedded.sim.boost_per_upate\`: unknown key; did you mean \`boost_per_update\`?`,
        `${f}: \`embedded.sim.latency.decode_ms_per_tokn\`: unknown key; did you mean \`decode_ms_per_token\`?`,
        `${f}: \`embedded.server.wrkers\`: unknown key; did you mean \`workers\`?`,
        `${f}: \`embedded.server.sandbox.disk_mbb\`: unknown key; did you mean \`disk_mb\`?`,
      ]),
    );
    expect(lines).toHaveLength(7);
  });

  it('names the value and what the key takes', async () => {
    const m = await messageOf(() =>
      parseTrainConfig({ dataset: { path: 'a' }, n: 1.5, mode: 'fast', embedded: { sim: { boost_per_update: 3 } } }, 'c.yaml'),
    );
    expect(m).toContain('c.yaml: `n`: wrong type: expected an integer, got 1.5');
    expect(m).toMatch(/c\.yaml: `mode`: .*"async"\|"sync".*\(got "fast"\)/);
    expect(m).toMatch(/c\.yaml: `embedded\.sim\.boost_per_update`: Too big: .*<=1 \(got 3\)/);
  });

  it('names the deepest key with the wrong type, inside unions too, and says "wrong type" for a present key', async () => {
    // `embedded` is `true` or a mapping: a mapping with a bad key is the mapping's problem, not "expected boolean".
    expect(await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, embedded: { backends: 'two' } }, 'c.yaml'))).toBe(
      'c.yaml: `embedded.backends`: wrong type: expected number, got "two"',
    );
    expect(await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, embedded: 'yes' }, 'c.yaml'))).toBe(
      'c.yaml: `embedded`: wrong type: expected boolean, got "yes"',
    );
    expect(
      await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, backends: [{ address: 'http://h:1', api: 'vlm' }] }, 'c.yaml')),
    ).toMatch(/^c\.yaml: `backends\[0\]\.api`: .*"vllm"\|"sglang"/);
    expect(await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, selection: { adaptive_n: 'on' } }, 'c.yaml'))).toBe(
      'c.yaml: `selection.adaptive_n`: wrong type: expected a mapping, got "on"',
    );
    expect(await messageOf(() => parseTrainConfig({ dataset: 'x.jsonl' }, 'c.yaml'))).toBe(
      'c.yaml: `dataset`: wrong type: expected a mapping, got "x.jsonl"',
    );
    expect(await messageOf(() => parseTrainConfig({}, 'c.yaml'))).toBe('c.yaml: `dataset`: required (expected a mapping)');
  });

  it('lists the valid keys when nothing is close', async () => {
    const m = await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, overlong: { zzzzzzzz: 1 } }, 'c.yaml'));
    expect(m).toBe('c.yaml: `overlong.zzzzzzzz`: unknown key; valid keys here: enabled, max_tokens, buffer, penalty_factor');
  });

  it('says why a vLLM/SGLang field raas sets itself is not a sampling parameter', async () => {
    const m = await messageOf(() =>
      parseTrainConfig({ dataset: { path: 'a' }, sampling_params: { max_tokens: 5, n: 2, logprobs: 1, min_new_tokens: 3 } }, 'c.yaml'),
    );
    expect(m.split('\n')).toEqual([
      'c.yaml: `sampling_params.max_tokens`: raas sets it per call; use `max_tokens_per_turn` (one call) or `max_response_tokens` (the whole trajectory)',
      "c.yaml: `sampling_params.n`: raas asks for one sample per call; the group size is the training config's `n`",
      "c.yaml: `sampling_params.logprobs`: raas always asks for the sampled tokens' logprobs; not settable",
      'c.yaml: `sampling_params.min_new_tokens`: write `min_tokens` (raas sends it to SGLang as min_new_tokens)',
    ]);
  });

  it('checks sampling parameters against the backends the config uses, and extra_body against what raas sets', async () => {
    expect(
      await messageOf(() =>
        parseTrainConfig({ dataset: { path: 'a' }, embedded: { api: 'sglang' }, sampling_params: { allowed_token_ids: [1] } }, 'c.yaml'),
      ),
    ).toBe('c.yaml: `sampling_params.allowed_token_ids`: SGLang does not support it (vLLM only); remove it, or use vllm backends');
    expect(
      await messageOf(() =>
        parseTrainConfig({ dataset: { path: 'a' }, backends: ['http://h:1/v1'], sampling_params: { custom_params: { a: 1 } } }, 'c.yaml'),
      ),
    ).toBe('c.yaml: `sampling_params.custom_params`: vLLM does not support it (SGLang only); remove it, or use sglang backends');
    expect(
      await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, sampling_params: { extra_body: { prompt: [1] } } }, 'c.yaml')),
    ).toBe('c.yaml: `sampling_params.extra_body.prompt`: raas sets "prompt" itself; it cannot be passed through');
    expect(
      await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, sampling_params: { repetition_penalty: 2.5 } }, 'c.yaml')),
    ).toMatch(/`sampling_params\.repetition_penalty`: Too big: .*<=2 \(got 2.5\)/);
    expect(await messageOf(() => parseTrainConfig({ dataset: { path: 'a' }, backends: ['not a url'] }, 'c.yaml'))).toContain(
      'c.yaml: `backends[0]`: "not a url" is not a URL',
    );
    const ok = parseTrainConfig({
      dataset: { path: 'a' },
      sampling_params: {
        repetition_penalty: 1.1,
        min_p: 0.05,
        presence_penalty: 0.5,
        frequency_penalty: -0.5,
        min_tokens: 2,
        ignore_eos: false,
        stop: ['###'],
        logit_bias: { '151645': -5 },
        extra_body: { priority: 1 },
      },
    });
    expect(ok.sampling_params).toMatchObject({ repetition_penalty: 1.1, min_p: 0.05, stop: ['###'], extra_body: { priority: 1 } });
  });
});

describe('--set key.path=value', () => {
  it('reads the value as YAML, typed through the schema, and names the flag when it is wrong', async () => {
    const f = file('set.yaml', `${base}n: 4\nembedded: true\n`);
    const cfg = loadTrainConfig(f, {}, [
      'n=2',
      'sampling_params.temperature=0.7',
      'sampling_params.stop=["###", "END"]',
      'embedded.sim.boost_per_update=0.2',
      'name=run-2',
    ]);
    expect(cfg).toMatchObject({
      n: 2,
      name: 'run-2',
      sampling_params: { temperature: 0.7, stop: ['###', 'END'] },
      embedded: { sim: { boost_per_update: 0.2 } },
    });
    expect(await messageOf(() => loadTrainConfig(f, {}, ['n=1.5']))).toBe('--set n=1.5: `n`: wrong type: expected an integer, got 1.5');
    expect(await messageOf(() => loadTrainConfig(f, {}, ['embedded.sim.boost_per_upate=0.2']))).toBe(
      '--set embedded.sim.boost_per_upate=0.2: `embedded.sim.boost_per_upate`: unknown key; did you mean `boost_per_update`?',
    );
    expect(await messageOf(() => loadTrainConfig(f, {}, ['n']))).toMatch(/^--set n: expected key\.path=value/);
    expect(await messageOf(() => loadTrainConfig(f, {}, ['n=[1']))).toMatch(/^--set n=\[1: the value is not a YAML scalar/);
    // A problem in the file is still the file's, next to the flag's.
    const g = file('set2.yaml', `${base}stepz: 3\n`);
    expect((await messageOf(() => loadTrainConfig(g, {}, ['batch_size=0']))).split('\n').sort()).toEqual([
      '--set batch_size=0: `batch_size`: Too small: expected number to be >0 (got 0)',
      `${g}: \`stepz\`: unknown key; did you mean \`steps\`?`,
    ]);
  });

  it('parses and applies assignments without touching the input', () => {
    const doc = { a: { b: 1 }, c: 'x' };
    const out = applySets(doc, parseSets(['a.b=2', 'a.d=true', 'c.e=null', 'f="007"']));
    expect(out).toEqual({ a: { b: 2, d: true }, c: { e: null }, f: '007' });
    expect(doc).toEqual({ a: { b: 1 }, c: 'x' });
  });
});

describe('serve, place and sim-llm configs name the file, the key path and the nearest key', () => {
  it('raas serve --config (and its sandbox section) and --set', async () => {
    const f = file('server.yaml', 'wrkers: {run: 2}\nllm: {routng: active}\nsandbox: {limits: {memroy_mb: 10}}\n');
    expect((await messageOf(() => loadServerConfig(f))).split('\n').sort()).toEqual([
      `${f}: \`llm.routng\`: unknown key; did you mean \`routing\`?`,
      `${f}: \`sandbox.limits.memroy_mb\`: unknown key; did you mean \`memory_mb\`?`,
      `${f}: \`wrkers\`: unknown key; did you mean \`workers\`?`,
    ]);
    const g = file('server2.yaml', 'sandbox: {disk_mbb: 10}\n');
    expect(await messageOf(() => loadServerConfig(g))).toBe(`${g}: \`sandbox.disk_mbb\`: unknown key; did you mean \`disk_mb\`?`);
    expect(await messageOf(() => loadServerConfig(undefined, {}, ['workers.run=0']))).toBe(
      '--set workers.run=0: `workers.run`: Too small: expected number to be >0 (got 0)',
    );
    const { config } = await loadServerConfig(undefined, {}, ['workers.run=3', 'llm.routing=assigned']);
    expect(config.workers.run).toBe(3);
    expect(config.llm.routing).toBe('assigned');
  });

  it('raas place --config', async () => {
    expect(await messageOf(() => parsePlaceConfig({ rollout_servers: ['http://a:1'], llm_server: ['x'] }, 'p.yaml'))).toContain(
      'p.yaml: `llm_server`: unknown key; did you mean `llm_servers`?',
    );
    expect(
      await messageOf(() => parsePlaceConfig({ rollout_servers: [{ url: 'http://a:1', tokn: 'x' }], llm_servers: ['x'] }, 'p.yaml')),
    ).toBe('p.yaml: `rollout_servers[0].tokn`: unknown key; did you mean `token`?');
  });

  it('raas sim-llm --config, flat or under sim:', async () => {
    const f = file('sim.yaml', 'boost_per_upate: 0.1\n');
    expect(await messageOf(() => readSimConfig(f))).toBe(`${f}: \`boost_per_upate\`: unknown key; did you mean \`boost_per_update\`?`);
    const g = file('sim2.yaml', 'sim: {filler: {median_tokns: 3}}\n');
    expect(await messageOf(() => readSimConfig(g))).toBe(`${g}: \`sim.filler.median_tokns\`: unknown key; did you mean \`median_tokens\`?`);
  });
});
