import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PythonResult } from '../../src/server/sandbox/types.js';
import { startToolServer } from './helpers.js';

describe('persistent python in the tool server (real /usr/bin/python3)', () => {
  let t: Awaited<ReturnType<typeof startToolServer>>;
  const py = (code: string, o: Record<string, unknown> = {}): Promise<PythonResult> =>
    t.client.call<PythonResult>('python', { code, ...o });
  beforeAll(async () => {
    t = await startToolServer();
  });
  afterAll(async () => t.close());

  it('keeps variables and imports across calls and returns the last expression', async () => {
    await py('import math\nx = 20');
    const r = await py('x + 1');
    expect(r.result).toBe('21');
    expect((await py('math.floor(2.5)')).result).toBe('2');
  });

  it('captures stdout, stderr and the traceback without the driver frames', async () => {
    const r = await py('import sys\nprint("out")\nprint("err", file=sys.stderr)\n1/0');
    expect(r.stdout).toBe('out\n');
    expect(r.stderr).toBe('err\n');
    expect(r.error?.type).toBe('ZeroDivisionError');
    expect(r.error?.traceback).toContain('<cell>');
    expect(r.error?.traceback).not.toContain('raas-python-driver');
  });

  it('user code cannot corrupt the protocol through stdout, stdin or sys.exit', async () => {
    const r = await py(
      'import sys\nsys.stdout.write("{\\"id\\": 1}\\n")\ntry:\n    input()\nexcept EOFError:\n    print("eof")\nsys.exit(3)',
    );
    expect(r.stdout).toContain('eof');
    expect(r.error?.type).toBe('SystemExit');
    expect((await py('x')).result).toBe('20');
  });

  it('a timeout raises KeyboardInterrupt and keeps the interpreter state', async () => {
    const r = await py('import time\ny = 5\ntime.sleep(30)', { timeout_s: 0.3 });
    expect(r.timed_out).toBe(true);
    expect(r.error?.type).toBe('KeyboardInterrupt');
    expect((await py('x + y')).result).toBe('25');
  });

  it('a busy loop is interrupted too', async () => {
    const r = await py('while True:\n    pass', { timeout_s: 0.3 });
    expect(r.timed_out).toBe(true);
    expect((await py('y')).result).toBe('5');
  });

  it('an aborted cell is interrupted; the next cell runs with the state kept', async () => {
    const ac = new AbortController();
    const p = t.client.call('python', { code: 'import time\nz = 3\ntime.sleep(30)' }, ac.signal);
    setTimeout(() => ac.abort(new Error('cancelled by the job')), 150);
    await expect(p).rejects.toThrow('cancelled by the job');
    expect((await py('z * x')).result).toBe('60');
  });

  it('syntax errors are answers, not crashes', async () => {
    const r = await py('def (');
    expect(r.error?.type).toBe('SyntaxError');
    expect((await py('1 + 1')).result).toBe('2');
  });

  it('output written by child processes to fd 1 is attached to the cell', async () => {
    const r = await py('import subprocess\nsubprocess.run(["echo", "from-child"])\nNone');
    await new Promise((res) => setTimeout(res, 20));
    expect(r.stdout + (await py('None')).stdout).toContain('from-child');
  });
});
