import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SidecarAnswer, SidecarEvent } from '../../src/protocol/sidecar.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = path.join(here, 'fixtures/scripted-sidecar.mjs');

/** The scripted sidecar as a real child process, with its stdout parsed strictly as protocol lines. */
function start(env: Record<string, string> = {}): {
  child: ChildProcess;
  lines: any[];
  stderr: () => string;
  exit: Promise<[number | null, string | null]>;
} {
  const child = spawn(process.execPath, [fixture], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: any[] = [];
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString('utf8');
    let nl: number;
    while ((nl = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      const obj = JSON.parse(line); // anything that is not a protocol line fails the test here
      if ('event' in obj) SidecarEvent.parse(obj);
      else SidecarAnswer.parse(obj);
      lines.push(obj);
    }
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const exit = new Promise<[number | null, string | null]>((resolve) => child.once('exit', (code, sig) => resolve([code, sig])));
  return { child, lines, stderr: () => err, exit };
}

function until(cond: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const t = setInterval(() => cond() && (clearInterval(t), resolve()), 10);
  });
}

describe('sidecar process (scripted backend)', () => {
  it('keeps stdout for protocol lines: a library write goes to stderr and is reported as a warning', async () => {
    const s = start({ SCRIPTED_STRAY: '1' });
    s.child.stdin!.write('{"id":1,"op":"hello"}\n{"id":2,"op":"next_batch"}\n');
    await until(() => s.lines.some((l) => l.id === 2));
    s.child.stdin!.end();
    expect(await s.exit).toEqual([0, null]);
    expect(s.stderr()).toContain('hello from a library');
    expect(s.lines[0]).toMatchObject({ event: 'warning' });
    expect(s.lines[0].data.message).toContain('stdout');
    expect(s.lines.slice(1).map((l) => [l.id, l.ok])).toEqual([
      [1, true],
      [2, true],
    ]);
  });

  it('exits 0 on SIGTERM after answering the in-flight request', async () => {
    const s = start({ SCRIPTED_OPTIONS: JSON.stringify({ delay_ms: null }) });
    s.child.stdin!.write('{"id":"b","op":"next_batch"}\n{"id":"h","op":"hello"}\n');
    await until(() => s.lines.length > 0);
    s.child.kill('SIGTERM');
    expect(await s.exit).toEqual([0, null]);
    expect(s.lines.map((l) => [l.id, l.error?.code])).toEqual([
      ['h', undefined],
      ['b', 'cancelled'],
    ]);
  });

  it('writes a fatal event and exits 1 when the backend cannot be made (bad config)', async () => {
    const s = start({ SCRIPTED_FATAL: '1' });
    expect(await s.exit).toEqual([1, null]);
    expect(s.lines).toEqual([{ event: 'fatal', data: { code: 'config_invalid', message: 'dataset.path: file not found: /nope.jsonl' } }]);
  });
});
