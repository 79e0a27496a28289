// Bad input to `raas sidecar` (a real child process, JSON lines on stdin/stdout): every bad line
// gets exactly one `{ok: false, error: {code, message}}` answer with a registered code, the sidecar
// keeps serving (hello answers afterwards), never starts the coordinator for bad input, and exits 0
// on shutdown with nothing left running.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/protocol/errors.js';
import { badSidecarLines } from './fuzz/arbitraries.js';
import { currentTest, observe } from './helpers/observe.js';
import { alive, descendantsOf } from '../helpers/procs.js';
import { CLI, tempDir } from './helpers/servers.js';

const RUNS = Number(process.env.RAAS_FUZZ_RUNS ?? 60) * 2;

describe('bad input to the sidecar', () => {
  const dir = tempDir('sidecar');
  fs.writeFileSync(path.join(dir, 'chat.jsonl'), '{"data_source": "chat", "instance_id": "c0"}\n');
  // The coordinator would talk to this server; bad input must never get that far.
  fs.writeFileSync(
    path.join(dir, 'train.yaml'),
    'name: rel-sidecar\nservers:\n  - url: http://127.0.0.1:9\ndataset:\n  path: chat.jsonl\nn: 2\nbatch_size: 1\n',
  );
  const child = spawn(
    process.execPath,
    [CLI, 'sidecar', '--config', path.join(dir, 'train.yaml'), '--log-level', 'warn', '--progress-interval-s', '0'],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const answers: any[] = [];
  const waiters: Array<() => void> = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    answers.push(JSON.parse(line)); // a non-JSON stdout line fails the test here
    waiters.splice(0).forEach((w) => w());
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  // The first answer waits for the sidecar to load (tens of seconds on a loaded machine).
  const nextAnswer = (n: number) =>
    new Promise<any>((resolve, reject) => {
      const ms = n === 0 ? 90_000 : 15_000;
      const t = setTimeout(() => reject(new Error(`no answer #${n} within ${ms / 1000} s; stderr: ${stderr.slice(-500)}`)), ms);
      // A sidecar that died (e.g. failed to start) fails the wait at once.
      void exited.then((code) => {
        clearTimeout(t);
        reject(new Error(`the sidecar exited (${code}) before answer #${n}; stderr: ${stderr.slice(-500)}`));
      });
      const check = () => {
        const a = answers.filter((x) => 'ok' in x)[n];
        if (a) {
          clearTimeout(t);
          resolve(a);
        } else waiters.push(check);
      };
      check();
    });
  let seen = 0;
  const tried = new Map<string, { n: number; codes: Set<string>; test?: string }>();

  afterAll(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    for (const [kind, t] of [...tried].sort())
      observe({
        section: 'bad_input',
        name: kind,
        observed: `${t.n} lines → ${[...t.codes].sort().join(', ')}`,
        figures: { inputs: t.n },
        test: t.test,
      });
  });

  it('every bad line gets one error answer with a registered code, and the sidecar keeps serving', async () => {
    child.stdin.write(JSON.stringify({ id: 'ready', op: 'hello' }) + '\n');
    expect(await nextAnswer(seen++)).toMatchObject({ id: 'ready', ok: true });
    await fc.assert(
      fc.asyncProperty(badSidecarLines, async (bad) => {
        child.stdin.write(bad.value + '\n');
        const a = await nextAnswer(seen++);
        const t = tried.get(bad.kind) ?? { n: 0, codes: new Set<string>(), test: currentTest() };
        t.n++;
        t.codes.add(a.error?.code);
        tried.set(bad.kind, t);
        expect(a.ok, `${bad.kind}: ${bad.value.slice(0, 200)} → ${JSON.stringify(a).slice(0, 300)}`).toBe(false);
        expect(Object.keys(ERROR_CODES)).toContain(a.error.code);
        expect(a.error.message.length).toBeGreaterThan(0);
      }),
      { numRuns: RUNS, seed: 11 },
    );
    // Raw bytes a JSON value cannot carry: invalid UTF-8 and a NUL, and an over-long line.
    child.stdin.write(Buffer.concat([Buffer.from('{"id": 1, "op": "he'), Buffer.from([0xff, 0x00, 0xfe]), Buffer.from('llo"}\n')]));
    const raw = await nextAnswer(seen++);
    expect(raw.ok).toBe(false);
    tried.set('sidecar: invalid UTF-8 / NUL bytes in a line', { n: 1, codes: new Set([raw.error.code]), test: currentTest() });
    // Still serving, and the coordinator was never started by any of it.
    child.stdin.write(JSON.stringify({ id: 'h', op: 'hello' }) + '\n');
    const hello = await nextAnswer(seen++);
    expect(hello).toMatchObject({ id: 'h', ok: true });
    child.stdin.write(JSON.stringify({ id: 's', op: 'status' }) + '\n');
    const status = await nextAnswer(seen++);
    expect(status).toMatchObject({ id: 's', ok: true, result: { state: 'idle' } });
    expect(alive(child.pid!)).toBe(true);
  }, 180_000);

  it('shutdown: exit code 0, no child process left', async () => {
    const kids = descendantsOf(child.pid!);
    child.stdin.write(JSON.stringify({ id: 'bye', op: 'shutdown' }) + '\n');
    const bye = await nextAnswer(seen++);
    expect(bye).toMatchObject({ id: 'bye', ok: true });
    expect(await exited).toBe(0);
    expect(kids.filter((k) => alive(k.pid))).toEqual([]);
    const total = [...tried.values()].reduce((n, t) => n + t.n, 0);
    observe({
      section: 'bad_input',
      name: 'sidecar: state afterwards',
      observed: `${total} bad lines in ${tried.size} classes, each answered once with ok:false; hello and status answered afterwards (coordinator never started: state idle); shutdown → exit 0`,
      figures: { bad_inputs: total },
    });
  });
});
