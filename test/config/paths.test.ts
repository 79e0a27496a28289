import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { SERVER_PATH_KEYS, SIM_PATH_KEYS, TRAIN_PATH_KEYS, resolveConfigPaths, type PathKey } from '../../src/protocol/config-paths.js';
import { loadTrainConfig } from '../../src/dapo/config.js';
import { loadServerConfig } from '../../src/server/config.js';
import { readSimConfig } from '../../src/sim/cli.js';

// Every path key of every config file is resolved against the folder of the file it is written in,
// whatever the working directory (the test's is the repository, never the config's folder).
const dir = mkdtempSync(path.join(tmpdir(), 'raas-config-paths-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const confDir = path.join(dir, 'conf');
mkdirSync(path.join(confDir, 'tok'), { recursive: true });

/** A document with `key` (dots, `[]` for a one-element list) set to `value`. */
function docWith(key: string, value: unknown): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let at: Record<string, unknown> = root;
  const parts = key.split('.');
  parts.forEach((p, i) => {
    const last = i === parts.length - 1;
    const name = p.endsWith('[]') ? p.slice(0, -2) : p;
    const next: Record<string, unknown> = {};
    if (p.endsWith('[]')) at[name] = last ? [value] : [next];
    else at[name] = last ? value : next;
    at = next;
  });
  return root;
}

/** The value at `key` of a parsed config (first element of a `[]` step). */
function valueAt(cfg: unknown, key: string): unknown {
  let at = cfg;
  for (const p of key.split('.')) {
    const name = p.endsWith('[]') ? p.slice(0, -2) : p;
    at = (at as Record<string, unknown>)?.[name];
    if (p.endsWith('[]')) at = (at as unknown[])?.[0];
  }
  return at;
}

/** What a relative value of each kind becomes, and the values a kind keeps as they are. */
const relative = (kind: PathKey[1]): string => (kind === 'command' ? './bin/tool' : kind === 'tokenizer' ? 'tok' : 'rel/thing');
const fill = (key: string): Record<string, unknown> =>
  key === 'servers[].token_file' || key.endsWith('join.token_file')
    ? { url: 'http://127.0.0.1:1' }
    : key === 'servers.token_file'
      ? { registry: 'http://127.0.0.1:1' }
      : key.endsWith('tenants[].token_file')
        ? { name: 'team' }
        : {};

/** The object holding `key`'s value inside `doc` (the first element of a `[]` step), where its siblings go. */
function holderOf(doc: Record<string, unknown>, key: string): Record<string, unknown> {
  const parts = key.split('.');
  let at: unknown = doc;
  for (const p of parts.slice(0, -1)) {
    const name = p.endsWith('[]') ? p.slice(0, -2) : p;
    at = (at as Record<string, unknown>)[name];
    if (p.endsWith('[]')) at = (at as unknown[])[0];
  }
  const last = parts.at(-1)!;
  return last.endsWith('[]') ? {} : (at as Record<string, unknown>);
}

function write(name: string, doc: Record<string, unknown>): string {
  const f = path.join(confDir, name);
  writeFileSync(f, stringify(doc));
  return f;
}

describe('training configs: every path key is relative to the config file', () => {
  for (const [key, kind] of TRAIN_PATH_KEYS) {
    it(key, () => {
      const doc = docWith(key, relative(kind));
      Object.assign(holderOf(doc, key), fill(key));
      const cfg = loadTrainConfig(write('train.yaml', { dataset: { path: 'd.jsonl' }, ...doc, ...(key === 'dataset.path' ? doc : {}) }));
      expect(valueAt(cfg, key)).toBe(path.join(confDir, relative(kind)));
    });
  }

  it('keeps absolute paths, bare command names and model ids; --set paths are relative to the working directory', () => {
    const cfg = loadTrainConfig(
      write('keep.yaml', {
        dataset: { path: '/abs/d.jsonl' },
        embedded: { server: { sandbox: { bwrap: 'bwrap', python: 'python3' }, tokenizer: 'Qwen/Qwen3-8B' }, sim: { tokenizer: 'qwen3' } },
      }),
      {},
      ['eval.dataset.path=e.jsonl'],
    );
    expect(cfg.dataset.path).toBe('/abs/d.jsonl');
    const emb = cfg.embedded as { server: { sandbox: Record<string, unknown>; tokenizer: string }; sim: { tokenizer: string } };
    expect(emb.server.sandbox).toMatchObject({ bwrap: 'bwrap', python: 'python3' });
    expect(emb.server.tokenizer).toBe('Qwen/Qwen3-8B');
    expect(emb.sim.tokenizer).toBe('qwen3');
    expect(cfg.eval.dataset?.path).toBe(path.resolve('e.jsonl'));
    // Unset, output_dir is the working directory's runs/; a trainer command runs in the config's folder.
    expect(cfg.output_dir).toBe('runs');
    expect(loadTrainConfig(write('cmd.yaml', { dataset: { path: 'd.jsonl' }, trainer: { command: 'true' } })).trainer.cwd).toBe(confDir);
  });
});

describe('raas serve --config: every path key is relative to the config file', () => {
  for (const [key, kind] of SERVER_PATH_KEYS) {
    it(key, async () => {
      if (key === 'token_file') writeFileSync(path.join(confDir, 'rel-token'), 'a-long-enough-token\n', { mode: 0o600 });
      const value = key === 'token_file' ? 'rel-token' : relative(kind);
      const doc = docWith(key, value);
      Object.assign(holderOf(doc, key), fill(key));
      const { config } = await loadServerConfig(write('server.yaml', doc));
      // token_file is read into token at load (the file's content proves where it was looked up).
      if (key === 'token_file') expect(config.token).toBe('a-long-enough-token');
      else expect(valueAt(config, key)).toBe(path.join(confDir, value));
    });
  }
});

describe('raas sim-llm --config: every path key is relative to the config file', () => {
  for (const [key, kind] of SIM_PATH_KEYS) {
    it(key, () => {
      expect(valueAt(readSimConfig(write('sim.yaml', docWith(key, relative(kind)))), key)).toBe(path.join(confDir, relative(kind)));
      expect(valueAt(readSimConfig(write('sim2.yaml', { sim: docWith(key, relative(kind)) })), key)).toBe(
        path.join(confDir, relative(kind)),
      );
    });
  }
});

it('leaves values of the wrong type for the schema to report, and never changes its input', () => {
  const doc = { dataset: { path: 5 }, embedded: { server: { handler_modules: 'x.mjs' } } };
  expect(resolveConfigPaths(doc, '/base', TRAIN_PATH_KEYS)).toEqual(doc);
  const d2 = { dataset: { path: 'a' } };
  expect(resolveConfigPaths(d2, '/base', TRAIN_PATH_KEYS)).toEqual({ dataset: { path: '/base/a' } });
  expect(d2.dataset.path).toBe('a');
});
