import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startRolloutServer } from '../../src/server/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cli = path.join(root, 'dist/src/cli.js');
const demo = path.join(root, 'configs/demo.yaml');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-config-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `raas <args>` to its end (nothing here gets far enough to start servers). */
function raas(args: string[]): { status: number | null; stderr: string; stdout: string } {
  const r = spawnSync(process.execPath, [cli, ...args], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

/** The same, without blocking, so the flag cases run side by side (each is a node start-up). */
function raasAsync(args: string[]): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('close', (status) => resolve({ status, stderr }));
  });
}

// The CLI as a user meets it: a child process, its exit code and its first stderr line.
describe.concurrent('flag errors name the flag and what it takes', () => {
  it.each([
    [['eval', demo, '--n', '-2'], 'raas: --n: must be a positive integer, got "-2"'],
    [['train', demo, '--steps', '1.5'], 'raas: --steps: must be a positive integer, got "1.5"'],
    [['serve', '--port', 'abc'], 'raas: --port: expected an integer 0–65535, got "abc"'],
    [['serve', '--workers-run', '0'], 'raas: --workers-run: must be a positive integer, got "0"'],
    [['serve', '--timeout', 'soon'], 'raas: --timeout: must be a number > 0, got "soon"'],
    [['serve', '--routing', 'fastest'], 'raas: --routing: Allowed choices are active, assigned, round_robin, got "fastest"'],
    [['sim-llm', '--port', '1.5'], 'raas: --port: expected an integer 0–65535, got "1.5"'],
    // A space instead of "=": the form it meant, not commander's "too many arguments".
    [['train', demo, '--set', 'n', '8'], 'raas: --set: expected key.path=value, got "n"; write it as one word with "=": --set n=8'],
    [
      ['serve', '--set', 'workers.run'],
      'raas: --set: expected key.path=value, got "workers.run"; write it as one word with "=": --set workers.run=<value>',
    ],
    [
      ['train', demo, '--set', 'embedded.backends=two'],
      'raas: --set embedded.backends=two: `embedded.backends`: wrong type: expected number, got "two"',
    ],
  ])(
    'raas %j',
    async (args, line) => {
      const r = await raasAsync(args);
      expect(r.status).toBe(1);
      expect(r.stderr.split('\n')[0]).toBe(line);
    },
    60_000,
  );
});

describe('a config file where the command wants another form', () => {
  it('raas serve <file> says serve takes --config; raas train/eval take --config too', async () => {
    const r = await raasAsync(['serve', 'configs/server.yaml']);
    expect(r.status).toBe(1);
    expect(r.stderr.split('\n').slice(0, 2)).toEqual([
      "raas: too many arguments for 'serve'. Expected 0 arguments but got 1.",
      '(raas serve takes its config file as a flag: raas serve --config configs/server.yaml)',
    ]);
    const t = await raasAsync(['train', '--config', demo, '--set', 'n=1.5']);
    expect(t.stderr.split('\n')[0]).toBe('raas: --set n=1.5: `n`: wrong type: expected an integer, got 1.5');
    const two = await raasAsync(['eval', demo, '--config', path.join(dir, 'other.yaml')]);
    expect(two.stderr.split('\n')[0]).toBe(`raas: two configs: ${demo} and --config ${path.join(dir, 'other.yaml')}; give one`);
  }, 120_000);
});

describe('config errors from the CLI: file, key path, nearest key, before anything starts', () => {
  it('raas train: a typo at any depth fails before any run directory or server exists', () => {
    const cfg = path.join(dir, 'typo.yaml');
    writeFileSync(
      cfg,
      `dataset: {path: ${path.join(root, 'configs/data/math.jsonl')}}\nembedded:\n  sim: {boost_per_upate: 0.1}\nsampling_params: {temprature: 1.0}\noutput_dir: out\n`,
    );
    const t0 = Date.now();
    const r = raas(['train', cfg]);
    expect(r.status).toBe(1);
    expect(r.stderr.split('\n').slice(0, 2).sort()).toEqual([
      `${cfg}: \`embedded.sim.boost_per_upate\`: unknown key; did you mean \`boost_per_update\`?`,
      `raas: ${cfg}: \`sampling_params.temprature\`: unknown key; did you mean \`temperature\`?`,
    ]);
    expect(existsSync(path.join(dir, 'out'))).toBe(false);
    expect(Date.now() - t0).toBeLessThan(30_000);
  }, 60_000);

  it('raas train/eval/serve --set: typed through the schema, errors name the flag', () => {
    expect(raas(['train', demo, '--set', 'n=1.5']).stderr.split('\n')[0]).toBe(
      'raas: --set n=1.5: `n`: wrong type: expected an integer, got 1.5',
    );
    expect(raas(['eval', demo, '--set', 'embedded.server.wrkers.run=2']).stderr.split('\n')[0]).toBe(
      'raas: --set embedded.server.wrkers.run=2: `embedded.server.wrkers`: unknown key; did you mean `workers`?',
    );
    expect(raas(['serve', '--set', 'llm.routing=fastest']).stderr.split('\n')[0]).toMatch(
      /^raas: --set llm\.routing=fastest: `llm\.routing`: Invalid option: expected one of "active"\|"assigned"\|"round_robin" \(got "fastest"\)$/,
    );
    expect(raas(['serve', '--set', 'port']).stderr.split('\n')[0]).toBe(
      'raas: --set: expected key.path=value, got "port"; write it as one word with "=": --set port=<value>',
    );
  }, 180_000);

  it('raas sidecar --set: the fatal event names the flag', () => {
    const r = raas(['sidecar', '--config', demo, '--set', 'embedded.sim.boost_per_upate=0.2']);
    expect(r.status).toBe(1);
    const fatal = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(fatal).toEqual({
      event: 'fatal',
      data: {
        code: 'config_invalid',
        message: '--set embedded.sim.boost_per_upate=0.2: `embedded.sim.boost_per_upate`: unknown key; did you mean `boost_per_update`?',
      },
    });
  }, 60_000);

  it('raas serve --set port=0 is applied (the server starts on a free port)', async () => {
    const child = spawn(process.execPath, [cli, 'serve', '--set', 'port=0', '--set', 'workers.run=3'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        child.once('exit', (code) => reject(new Error(`exited ${code}`)));
      });
      const url = /listening on (http:\/\/\S+)/.exec(line)![1]!;
      expect(url).not.toMatch(/:8006$/);
      const status = (await (await fetch(`${url}/status`)).json()) as { workers: { run: { size: number } } };
      expect(status.workers.run.size).toBe(3);
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    }
  }, 120_000);
});

describe('raas sim-llm serves the bundled datasets by default', () => {
  it('answers a math job from configs/data/math.jsonl with a boxed answer, not filler', async () => {
    const child = spawn(process.execPath, [cli, 'sim-llm', '--port', '0', '--seed', '1'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const srv = await startRolloutServer({ port: 0, log_level: 'silent' });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        child.once('exit', (code) => reject(new Error(`sim-llm exited ${code}`)));
      });
      expect(line).toMatch(/\b5 dataset file\(s\)/);
      const url = /listening on (http:\/\/\S+)/.exec(line)![1]!;
      const add = await fetch(`${srv.url}/add_llm_server`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ address: url }),
      });
      expect(((await add.json()) as { probe: { answered: boolean } }).probe.answered).toBe(true);
      const instance = { data_source: 'math', instance_id: 'math-001', problem: 'What is $17 \\times 23$?', answer: '391' };
      const res = (await (
        await fetch(`${srv.url}/process`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ instance, sampling_params: { temperature: 1 } }),
        })
      ).json()) as { critical_error: unknown; messages: Array<{ role: string; content: string }> };
      expect(res.critical_error).toBeNull();
      const said = res.messages
        .filter((m) => m.role === 'assistant')
        .map((m) => m.content)
        .join('\n');
      expect(said).toMatch(/\\boxed\{/);
    } finally {
      await srv.close();
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    }
  }, 120_000);
});
