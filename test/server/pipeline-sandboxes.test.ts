import { describe, expect, it } from 'vitest';
import type { RaasError } from '../../src/protocol/errors.js';
import { LazySandboxRuntime, StageSandboxes } from '../../src/server/pipeline/sandboxes.js';
import type { Sandbox, SandboxSpec } from '../../src/server/sandbox/types.js';

// The pipeline's sandbox plumbing without starting a sandbox: the lazy runtime's settings checks,
// its shutdown and its retry after a failed creation (the real sandbox module, a config it refuses),
// and the per-stage bookkeeping of which sandboxes to close (sandboxes that count their closes).

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as never;

describe('LazySandboxRuntime', () => {
  it('validate() refuses a bad key naming sandbox.<path>; describe() is null until the settings were read', async () => {
    const rt = new LazySandboxRuntime({ runtime: 'podman' }, quiet);
    expect(rt.describe()).toBeNull();
    await expect(rt.validate()).rejects.toMatchObject({ code: 'config_invalid', message: expect.stringMatching(/^sandbox\.runtime: /) });
    expect(rt.describe()).toBeNull();
  });

  it('validate() of good settings describes them (isolation and limits) for /status', async () => {
    const rt = new LazySandboxRuntime({ runtime: 'process' }, quiet);
    await rt.validate();
    const d = rt.describe()!;
    expect(d).not.toBeNull();
    expect(d).toMatchObject({ runtime: 'process' });
    await rt.close();
  });

  it('a creation that fails is not cached: every open tries again and says why', async () => {
    const rt = new LazySandboxRuntime({ runtime: 'bwrap', nonsense_key: 1 }, quiet);
    const spec = {} as SandboxSpec;
    await expect(rt.open(spec)).rejects.toMatchObject({ code: 'config_invalid', message: expect.stringMatching(/^sandbox: /) });
    await expect(rt.open(spec)).rejects.toMatchObject({ code: 'config_invalid' });
    await rt.close();
  });

  it('a failed creation is retried with the settings as they are then; once created, opens go to the runtime, and /status can describe it', async () => {
    const settings: Record<string, unknown> = { runtime: 'apptainer', nonsense_key: 1 };
    const rt = new LazySandboxRuntime(settings, quiet);
    const bad = await rt.open({} as SandboxSpec).catch((e: RaasError) => e);
    expect(bad).toMatchObject({ code: 'config_invalid' });
    expect(bad.cause).toBeDefined(); // the schema's own error travels along
    delete settings.nonsense_key;
    settings.apptainer = { binary: '/nonexistent/apptainer' };
    // Created now; the runtime itself refuses the open (no apptainer binary at that path).
    await expect(rt.open({} as SandboxSpec)).rejects.toMatchObject({ code: 'sandbox_unavailable' });
    await expect(rt.open({} as SandboxSpec)).rejects.toMatchObject({ code: 'sandbox_unavailable' });
    expect(rt.describe()).toMatchObject({ runtime: 'apptainer' }); // described at creation, without validate()
    await rt.close();
  });

  it('validate() logs the isolation and limits in force', async () => {
    const infos: Array<[unknown, string]> = [];
    const rt = new LazySandboxRuntime({ runtime: 'process' }, { ...quiet, info: (o: unknown, m: string) => infos.push([o, m]) } as never);
    await rt.validate();
    expect(infos).toEqual([[{ sandbox: rt.describe() }, 'sandbox isolation and limits in force']]);
    await rt.close();
  });

  it('after close() every open is refused: the server is shutting down', async () => {
    const rt = new LazySandboxRuntime({ runtime: 'process' }, quiet);
    await rt.close();
    await expect(rt.open({} as SandboxSpec)).rejects.toMatchObject({ code: 'sandbox_unavailable', message: 'the server is shutting down' });
  });
});

/** A sandbox that only counts its closes (closing one that fails to close must not throw). */
function fakeSandbox(name: string, failClose = false): Sandbox & { closes: number } {
  const s = {
    name,
    closes: 0,
    async close() {
      s.closes++;
      if (failClose) throw new Error('close failed');
    },
  };
  return s as unknown as Sandbox & { closes: number };
}

/** A runtime handing out the given sandboxes in order, recording the signal each open got. */
function runtimeOf(boxes: Sandbox[], gate?: Promise<void>): { rt: LazySandboxRuntime; signals: Array<AbortSignal | undefined> } {
  const signals: Array<AbortSignal | undefined> = [];
  let i = 0;
  const rt = {
    async open(_spec: SandboxSpec, signal?: AbortSignal) {
      signals.push(signal);
      await gate;
      return boxes[i++]!;
    },
  } as unknown as LazySandboxRuntime;
  return { rt, signals };
}

describe('StageSandboxes', () => {
  it("opens with the job's signal unless given one, counts what it opened, closes all but the kept runtime", async () => {
    const a = fakeSandbox('a'),
      b = fakeSandbox('b', true),
      keep = fakeSandbox('keep');
    const { rt, signals } = runtimeOf([a, keep, b]);
    const job = new AbortController();
    const own = new AbortController();
    const st = new StageSandboxes(rt, { signal: job.signal });
    expect(st.count).toBe(0);
    expect(await st.open({} as SandboxSpec)).toBe(a);
    expect(await st.open({} as SandboxSpec, own.signal)).toBe(keep);
    expect(await st.open({} as SandboxSpec)).toBe(b);
    expect(signals).toEqual([job.signal, own.signal, job.signal]);
    expect(st.count).toBe(3);
    await expect(st.closeAll(keep)).resolves.toBeUndefined(); // b's failing close does not throw
    expect([a.closes, b.closes, keep.closes]).toEqual([1, 1, 0]);
  });

  it('closeAll() without a kept sandbox closes every one', async () => {
    const a = fakeSandbox('a'),
      b = fakeSandbox('b');
    const st = new StageSandboxes(runtimeOf([a, b]).rt, { signal: new AbortController().signal });
    await st.open({} as SandboxSpec);
    await st.open({} as SandboxSpec);
    await st.closeAll();
    expect([a.closes, b.closes]).toEqual([1, 1]);
  });

  it('a sandbox that opens after the stage ended (end() or closeAll()) is closed at once and the open fails as cancelled', async () => {
    for (const finish of ['end', 'closeAll'] as const) {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const late = fakeSandbox('late', true);
      const st = new StageSandboxes(runtimeOf([late], gate).rt, { signal: new AbortController().signal });
      const opening = st.open({} as SandboxSpec);
      if (finish === 'end') st.end();
      else await st.closeAll();
      release();
      await expect(opening).rejects.toMatchObject({ code: 'cancelled', message: 'the stage ended before the sandbox opened' });
      expect(late.closes).toBe(1);
      expect(st.count).toBe(0);
    }
  });
});
