import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadTrainConfig } from '../../src/dapo/config.js';
import { loadServerConfig } from '../../src/server/config.js';
import { resolveToken } from '../../src/util/secret.js';

// A bearer token given on a command line is visible to every user of a shared node (`ps`, and
// /proc/<pid>/cmdline, which is world-readable); a 0600 file or the process's own environment is not.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cli = path.join(root, 'dist/src/cli.js');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-token-src-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const TOKEN = 'tok-' + 'x9'.repeat(12);

function secretFile(name: string, mode: number, text = `${TOKEN}\n`): string {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  chmodSync(f, mode);
  return f;
}

/** `raas serve` as a child; resolves with its URL once it listens. */
async function serve(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [cli, 'serve', '--port', '0', ...args], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`raas serve exited ${code}: ${err}`)));
  });
  return { child, url };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

describe('resolveToken: inline, file (owner-only) or environment, never two', () => {
  it('reads a 0600 file, trimmed', () => {
    expect(resolveToken({ token_file: secretFile('ok', 0o600) }, 'token')).toBe(TOKEN);
  });
  it('refuses a file group or others can read, naming the fix', () => {
    const f = secretFile('open', 0o644);
    expect(() => resolveToken({ token_file: f }, 'servers[0]')).toThrow(
      `servers[0].token_file: ${f} is readable by other users (mode 644); run chmod 600 ${f}`,
    );
  });
  it('refuses an empty file and a missing variable', () => {
    const f = secretFile('empty', 0o600, ' \n');
    expect(() => resolveToken({ token_file: f }, 'token')).toThrow(`token.token_file: ${f} is empty`);
    expect(() => resolveToken({ token_env: 'RAAS_TEST_UNSET_VAR' }, 'token', {})).toThrow(
      'token.token_env: the environment variable RAAS_TEST_UNSET_VAR is not set or empty',
    );
  });
  it('takes a variable, and refuses two sources at once', () => {
    expect(resolveToken({ token_env: 'T' }, 'token', { T: ` ${TOKEN} ` })).toBe(TOKEN);
    expect(() => resolveToken({ token: TOKEN, token_env: 'T' }, 'servers[1]', { T: 'y' })).toThrow(
      'servers[1]: give one of token, token_file, token_env (got token and token_env)',
    );
  });
});

describe('config files: token_file relative to the file, token_env by name', () => {
  it('raas serve --config: token_file resolves against the config file folder', async () => {
    const sub = mkdtempSync(path.join(dir, 'cfg-'));
    writeFileSync(path.join(sub, 'server.yaml'), 'token_file: secret\n');
    writeFileSync(path.join(sub, 'secret'), TOKEN);
    chmodSync(path.join(sub, 'secret'), 0o600);
    const { config } = await loadServerConfig(path.join(sub, 'server.yaml'));
    expect(config.token).toBe(TOKEN);
    expect(config).not.toHaveProperty('token_file');
  });
  it('raas train: servers[].token_file resolves against the config file folder', () => {
    const sub = mkdtempSync(path.join(dir, 'train-'));
    writeFileSync(
      path.join(sub, 'train.yaml'),
      `dataset: {path: ${path.join(root, 'configs/data/math.jsonl')}}\nservers:\n  - {url: "http://127.0.0.1:1", token_file: secret}\n  - {url: "http://127.0.0.1:2", token_env: RAAS_TOKEN}\n`,
    );
    const cfg = loadTrainConfig(path.join(sub, 'train.yaml'));
    expect(cfg.servers[0]).toEqual({ url: 'http://127.0.0.1:1', token_file: path.join(sub, 'secret') });
    expect(cfg.servers[1]).toEqual({ url: 'http://127.0.0.1:2', token_env: 'RAAS_TOKEN' });
  });
});

describe('raas serve --token-file / --token-env: auth on, and the token on no command line', () => {
  it.each([
    ['--token-file', () => ['--token-file', secretFile('serve-secret', 0o600)], {}],
    ['--token-env', () => ['--token-env', 'RAAS_TEST_TOKEN'], { RAAS_TEST_TOKEN: TOKEN }],
  ] as const)(
    '%s',
    async (_name, args, env) => {
      const { child, url } = await serve(args(), env);
      try {
        expect((await fetch(`${url}/status`)).status).toBe(401);
        expect((await fetch(`${url}/status`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
        const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8');
        expect(cmdline).toContain('serve');
        expect(cmdline).not.toContain(TOKEN);
      } finally {
        await stop(child);
      }
    },
    60_000,
  );

  it('a world-readable token file stops the start with the chmod fix', async () => {
    const f = secretFile('serve-open', 0o640);
    await expect(serve(['--token-file', f])).rejects.toThrow(
      `token.token_file: ${f} is readable by other users (mode 640); run chmod 600 ${f}`,
    );
  }, 60_000);
});
