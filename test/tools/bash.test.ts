import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import type { BashResult } from '../../src/server/sandbox/types.js';
import { startToolServer } from './helpers.js';

describe('PTY bash in the tool server (real node-pty, real bash)', () => {
  let t: Awaited<ReturnType<typeof startToolServer>>;
  const bash = (command: string, o: Record<string, unknown> = {}, signal?: AbortSignal): Promise<BashResult> =>
    t.client.call<BashResult>('bash', { command, ...o }, signal);
  beforeAll(async () => {
    t = await startToolServer({ output_cap: 2000 });
  });
  afterAll(async () => t.close());

  it('runs a command and reports its exit code from the prompt sentinel', async () => {
    expect(await bash('echo hi')).toEqual({ output: 'hi\n', exit_code: 0, timed_out: false, truncated: false });
    expect((await bash('(exit 3)')).exit_code).toBe(3);
  });

  it('keeps cwd and environment across commands', async () => {
    await bash('mkdir -p sub && cd sub && export FOO=bar');
    expect((await bash('pwd; echo $FOO')).output).toBe(`${t.workspace}/sub\nbar\n`);
    await bash('cd ..');
  });

  it('runs multi-line commands as one unit with one exit code', async () => {
    const r = await bash('for i in 1 2\ndo echo $i\ndone\nfalse');
    expect(r.output).toBe('1\n2\n');
    expect(r.exit_code).toBe(1);
  });

  it('a command that reads stdin cannot swallow the sentinel', async () => {
    const r = await bash('cat <<EOF\nline\nEOF');
    expect(r.output).toBe('line\n');
    expect(r.exit_code).toBe(0);
  });

  it('runs a command whose line is longer than the terminal line limit', async () => {
    const r = await bash(`echo ${'x'.repeat(9000)} | wc -c`);
    expect(r.output.trim()).toBe('9001');
  });

  it('times out with Ctrl-C, keeps the output so far, and the shell survives', async () => {
    const r = await bash('echo started; sleep 30', { timeout_s: 0.5 });
    expect(r.timed_out).toBe(true);
    expect(r.exit_code).toBeNull();
    expect(r.output).toContain('started');
    expect((await bash('echo alive')).output).toBe('alive\n');
  });

  it('answers on a no-change timeout, then accepts keystrokes with is_input', async () => {
    const r = await bash('read -p "name? " X; echo "got $X"', { no_change_timeout_s: 0.3 });
    expect(r.running).toBe(true);
    expect(r.exit_code).toBeNull();
    expect(r.output).toContain('name?');
    const refused = bash('echo other');
    await expect(refused).rejects.toThrow(/still running/);
    const r2 = await bash('alice', { is_input: true });
    expect(r2.output).toContain('got alice');
    expect(r2.exit_code).toBe(0);
  });

  it('is_input C-c interrupts a running program', async () => {
    const r = await bash('sleep 30', { no_change_timeout_s: 0.2 });
    expect(r.running).toBe(true);
    const r2 = await bash('C-c', { is_input: true });
    expect(r2.exit_code).toBe(130);
  });

  it('refuses a second command while one runs', async () => {
    const first = bash('sleep 0.5; echo first');
    await new Promise((r) => setTimeout(r, 50));
    await expect(bash('echo second')).rejects.toSatisfy(
      (e: unknown) => e instanceof RaasError && e.code === 'tool_error' && /one command at a time/.test(e.message),
    );
    expect((await first).output).toBe('first\n');
  });

  it('caps output keeping head and tail and marks the cut', async () => {
    const r = await bash('seq 1 100000');
    expect(r.truncated).toBe(true);
    expect(r.output.startsWith('1\n2\n3\n')).toBe(true);
    expect(r.output.trimEnd().endsWith('99999\n100000')).toBe(true);
    expect(r.output).toMatch(/characters cut/);
    expect(r.output.length).toBeLessThan(2200);
  });

  it('answers non-UTF-8 output with replacement characters and keeps serving', async () => {
    const r = await bash("printf 'a\\xff\\xfeb\\n'");
    expect(r.output).toContain('a');
    expect(r.output).toContain('\ufffd');
    expect((await bash('echo ok')).output).toBe('ok\n');
  });

  it('an aborted call interrupts the command (Ctrl-C) and rejects with the reason', async () => {
    const ac = new AbortController();
    const p = bash('sleep 30', {}, ac.signal);
    setTimeout(() => ac.abort(new Error('job cancelled')), 100);
    await expect(p).rejects.toThrow('job cancelled');
    // The next command waits for the interrupted one to unwind instead of being refused.
    expect((await bash('echo back')).output).toBe('back\n');
  });

  it('a command cannot silence the sentinel by assigning PROMPT_COMMAND', async () => {
    const r = await bash('PROMPT_COMMAND=true; echo next');
    expect(r.output).toMatch(/readonly variable/);
    expect((await bash('echo still')).exit_code).toBe(0);
  });

  it('a new shell starts after exit', async () => {
    const r = await bash('exit 4');
    expect(r.output).toMatch(/bash exited/);
    expect((await bash('echo new')).output).toBe('new\n');
  });
});
