import { afterEach, describe, expect, it, vi } from 'vitest';
import { Batch } from '../../src/protocol/batch.js';
import { HelloResult, SIDECAR_PROTOCOL_VERSION, SidecarAnswer, SidecarEvent } from '../../src/protocol/sidecar.js';
import { LineSplitter } from '../../src/sidecar/lines.js';
// @ts-expect-error plain JS fixture
import { scriptedBackend } from './fixtures/scripted-backend.mjs';
import { harness } from './helpers.js';

describe('LineSplitter', () => {
  it('splits chunks into lines, drops \\r, keeps multi-byte characters split across chunks', () => {
    const s = new LineSplitter(1024);
    const bytes = Buffer.from('{"a":"é"}\r\n{"b":1}\n{"c"');
    const cut = bytes.indexOf(0xc3) + 1; // inside the two-byte é
    expect([...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut))]).toEqual([
      { kind: 'line', text: '{"a":"é"}' },
      { kind: 'line', text: '{"b":1}' },
    ]);
    expect(s.push(Buffer.from(':2}'))).toEqual([]);
    expect(s.end()).toEqual([{ kind: 'line', text: '{"c":2}' }]);
    expect(s.end()).toEqual([]);
  });

  it('reports an over-long line once, without buffering it, and recovers at its newline', () => {
    const s = new LineSplitter(10);
    expect(s.push(Buffer.from('x'.repeat(8)))).toEqual([]);
    expect(s.push(Buffer.from('y'.repeat(50)))).toEqual([]);
    expect(s.push(Buffer.from('zz\nok\n'))).toEqual([
      { kind: 'too_long', bytes: 60 },
      { kind: 'line', text: 'ok' },
    ]);
  });
});

describe('sidecar protocol (in-process, scripted backend)', () => {
  it('answers hello with versions, ops and the config sizes without starting the coordinator', async () => {
    const backend = scriptedBackend({ batch_size: 3, n: 4 });
    const h = harness(backend);
    h.send({ id: 1, op: 'hello', client: 'test' });
    const a = await h.answer(1);
    expect(SidecarAnswer.parse(a).ok).toBe(true);
    expect(HelloResult.parse(a.result)).toMatchObject({
      protocol_version: SIDECAR_PROTOCOL_VERSION,
      batch_size: 3,
      group_size: 4,
      name: 'scripted',
    });
    expect(a.result.ops).toEqual([
      'hello',
      'next_batch',
      'update_weights',
      'pause_generation',
      'resume_generation',
      'status',
      'checkpoint',
      'resume',
      'eval',
      'shutdown',
    ]);
    expect(a.result.capabilities).toContain('pause_generation');
    h.send({ id: 's', op: 'status' });
    expect((await h.answer('s')).result).toEqual({ state: 'idle' });
    h.send({ id: 'v', op: 'hello', protocol_version: 99 });
    const v = await h.answer('v');
    expect(v.error.code).toBe('bad_request');
    expect(v.error.message).toContain('protocol_version 99');
    expect(backend.state.started).toBe(0);
    h.end();
    await h.done;
  });

  it('answers bad lines and unknown ops with documented codes and keeps serving', async () => {
    const h = harness(scriptedBackend());
    h.raw('this is not json\n');
    h.raw('[1,2]\n');
    h.send({ op: 'hello' });
    h.send({ id: 7, op: 'train_faster' });
    h.send({ id: 8, op: 'next_batch', timeout_s: -1 });
    h.send({ id: 9, op: 'status', extra: true });
    h.send({ id: 10, op: 'hello' });
    await h.answer(10);
    const errors = h.lines.filter((l) => l.ok === false);
    expect(errors.map((e) => [e.id, e.error.code])).toEqual([
      [null, 'parse_error'],
      [null, 'bad_request'],
      [null, 'bad_request'],
      [7, 'unknown_op'],
      [8, 'bad_request'],
      [9, 'bad_request'],
    ]);
    expect(errors[3].error.message).toContain('train_faster');
    expect(errors[4].error.message).toContain('timeout_s');
    expect(errors[5].error.message).toContain('extra');
    for (const l of h.lines) SidecarAnswer.parse(l);
    h.end();
    await h.done;
  });

  it('discards an over-long line with line_too_long and serves the next one', async () => {
    const h = harness(scriptedBackend(), { maxLineBytes: 64 });
    h.send({ id: 1, op: 'resume', state: { pad: 'x'.repeat(200) } });
    h.send({ id: 2, op: 'hello' });
    await h.answer(2);
    expect(h.lines[0]).toMatchObject({ id: null, ok: false, error: { code: 'line_too_long' } });
    expect(h.lines[0].error.message).toContain('--max-line-bytes');
    h.end();
    await h.done;
  });

  it('runs three steps of next_batch + update_weights; batches follow the one Batch schema', async () => {
    const backend = scriptedBackend({ batch_size: 2, n: 3 });
    const h = harness(backend);
    for (let step = 0; step < 3; step++) {
      h.send({ id: `b${step}`, op: 'next_batch', timeout_s: 5 });
      const b = Batch.parse((await h.answer(`b${step}`)).result);
      expect(b.step).toBe(step);
      expect(b.policy_version).toBe(step);
      expect(b.groups).toHaveLength(2);
      expect(b.groups.every((g) => g.rollouts.length === 3)).toBe(true);
      h.send({ id: `u${step}`, op: 'update_weights', weight_version: `w${step + 1}` });
      expect((await h.answer(`u${step}`)).result).toEqual({ policy_version: step + 1 });
    }
    expect(backend.state.started).toBe(1);
    h.end();
    await h.done;
    expect(backend.state.open).toBe(0);
  });

  it('serialises coordinator ops in arrival order while status answers at once', async () => {
    const backend = scriptedBackend({ delay_ms: 50 });
    const h = harness(backend);
    h.send({ id: 'b', op: 'next_batch' });
    h.send({ id: 'u', op: 'update_weights', version: 5 });
    h.send({ id: 'b2', op: 'next_batch' });
    h.send({ id: 's', op: 'status' });
    await h.answer('b2');
    const order = h.lines.map((l) => l.id);
    expect(order).toEqual(['s', 'b', 'u', 'b2']);
    expect(h.lines[3].result.policy_version).toBe(5);
    h.end();
    await h.done;
  });

  describe('with fake timers', () => {
    afterEach(() => void vi.useRealTimers());

    it('reports step_progress while next_batch waits, then stops', async () => {
      vi.useFakeTimers();
      const h = harness(scriptedBackend({ delay_ms: 120 }), { progressIntervalMs: 25 });
      h.send({ id: 'b', op: 'next_batch' });
      await vi.advanceTimersByTimeAsync(130);
      await h.answer('b');
      const events = h.lines.filter((l) => 'event' in l).map((l) => SidecarEvent.parse(l));
      expect(events.map((e) => e.event === 'step_progress' && [e.data.request_id, e.data.elapsed_s])).toEqual([
        ['b', 0.025],
        ['b', 0.05],
        ['b', 0.075],
        ['b', 0.1],
      ]);
      expect(events[0].data).toHaveProperty('status', { step: 0, policy_version: 0, closed: false, paused: false });
      const after = h.lines.length;
      await vi.advanceTimersByTimeAsync(200);
      expect(h.lines.length).toBe(after);
      h.end();
      await h.done;
    });

    it('warns while a close is slow, and still answers shutdown', async () => {
      vi.useFakeTimers();
      const backend = scriptedBackend({ close_delay_ms: 12_000 });
      const h = harness(backend);
      h.send({ id: 1, op: 'status' });
      h.send({ id: 2, op: 'update_weights' });
      await vi.advanceTimersByTimeAsync(1);
      h.send({ id: 3, op: 'shutdown' });
      await vi.advanceTimersByTimeAsync(6_000);
      expect(h.lines.filter((l) => l.event === 'warning').map((l) => l.data.message)).toEqual([
        'closing: the coordinator is still cancelling its jobs after 5 s',
      ]);
      expect(h.lines.some((l) => l.id === 3)).toBe(false);
      await vi.advanceTimersByTimeAsync(6_000);
      await h.done;
      expect(h.lines.at(-1)).toEqual({ id: 3, ok: true, result: { closed: true, jobs: 'cancelled' } });
      expect(backend.state.open).toBe(0);
    });

    it('status answers at once while the coordinator starts', async () => {
      vi.useFakeTimers();
      const h = harness(scriptedBackend({ start_delay_ms: 10_000 }));
      h.send({ id: 'b', op: 'next_batch' });
      await vi.advanceTimersByTimeAsync(1);
      h.send({ id: 's', op: 'status' });
      await vi.advanceTimersByTimeAsync(1);
      expect((await h.answer('s')).result).toEqual({ state: 'starting' });
      await vi.advanceTimersByTimeAsync(10_000);
      expect((await h.answer('b')).ok).toBe(true);
      h.send({ id: 's2', op: 'status' });
      await vi.advanceTimersByTimeAsync(1);
      expect((await h.answer('s2')).result.state).toBe('running');
      h.end();
      await h.done;
    });

    it('answers timeout when next_batch waits past timeout_s', async () => {
      vi.useFakeTimers();
      const h = harness(scriptedBackend({ delay_ms: null }));
      h.send({ id: 1, op: 'next_batch', timeout_s: 30 });
      await vi.advanceTimersByTimeAsync(29_000);
      expect(h.lines).toEqual([]);
      await vi.advanceTimersByTimeAsync(1_000);
      expect((await h.answer(1)).error).toEqual({ code: 'timeout', message: 'next_batch: no batch within timeout_s=30' });
      h.end();
      await h.done;
    });
  });

  it('resume and shutdown after a checkpoint keep the jobs in flight; shutdown without one, or with cancel: true, cancels them', async () => {
    const kept = scriptedBackend();
    const h = harness(kept);
    h.send({ id: 1, op: 'next_batch' });
    h.send({ id: 2, op: 'checkpoint' });
    const state = (await h.answer(2)).result.state;
    h.send({ id: 3, op: 'resume', state });
    await h.answer(3);
    expect(kept.state.cancels).toEqual([false]); // the replaced coordinator's jobs are re-attached, not cancelled
    h.send({ id: 4, op: 'shutdown' });
    expect((await h.answer(4)).result).toEqual({ closed: true, jobs: 'kept' });
    await h.done;
    expect(kept.state.cancels).toEqual([false, false]);

    const fresh = scriptedBackend();
    const f = harness(fresh);
    f.send({ id: 1, op: 'next_batch' });
    await f.answer(1);
    f.send({ id: 2, op: 'shutdown' });
    expect((await f.answer(2)).result).toEqual({ closed: true, jobs: 'cancelled' });
    await f.done;
    expect(fresh.state.cancels).toEqual([true]);

    const asked = scriptedBackend();
    const a = harness(asked);
    a.send({ id: 1, op: 'checkpoint' });
    await a.answer(1);
    a.send({ id: 2, op: 'shutdown', cancel: true });
    expect((await a.answer(2)).result).toEqual({ closed: true, jobs: 'cancelled' });
    await a.done;
    expect(asked.state.cancels).toEqual([true]);
  });

  it('checkpoint and resume round-trip the coordinator state', async () => {
    const backend = scriptedBackend();
    const h = harness(backend);
    h.send({ id: 1, op: 'next_batch' });
    h.send({ id: 2, op: 'update_weights' });
    h.send({ id: 3, op: 'checkpoint' });
    const state = (await h.answer(3)).result.state;
    expect(state).toEqual({ step: 1, policy_version: 1 });
    h.send({ id: 4, op: 'next_batch' });
    h.send({ id: 5, op: 'resume', state });
    h.send({ id: 6, op: 'next_batch' });
    expect((await h.answer(6)).result.step).toBe(1);
    expect(backend.state).toMatchObject({ started: 2, closed: 1, open: 1 });
    h.send({ id: 7, op: 'resume', state: { nope: 1 } });
    expect((await h.answer(7)).error.code).toBe('internal');
    h.send({ id: 8, op: 'eval', n: 2 });
    expect((await h.answer(8)).result).toEqual({ prompts: 2, n: 2, mean_reward: 0.5 });
    h.end();
    await h.done;
    expect(backend.state.open).toBe(0);
  });

  it('pause_generation and resume_generation run in arrival order with the other coordinator ops', async () => {
    const backend = scriptedBackend();
    const h = harness(backend);
    // A co-located step, pipelined: batch, pause (abort), weights, resume, next batch.
    h.send({ id: 1, op: 'next_batch' });
    h.send({ id: 2, op: 'pause_generation', mode: 'abort', abort_grace_s: 2 });
    h.send({ id: 3, op: 'update_weights' });
    h.send({ id: 4, op: 'resume_generation' });
    h.send({ id: 5, op: 'next_batch' });
    expect((await h.answer(2)).result).toMatchObject({ paused: true, mode: 'abort', policy_version: 0 });
    expect((await h.answer(4)).result).toMatchObject({ resumed: true, policy_version: 1 });
    expect((await h.answer(5)).result.policy_version).toBe(1);
    // The defaults are filled in before the coordinator sees the request.
    h.send({ id: 6, op: 'pause_generation' });
    await h.answer(6);
    expect(backend.state.pauses).toEqual([{ mode: 'abort', abort_grace_s: 2 }, 'resume', { mode: 'drain', abort_grace_s: 5 }]);
    h.send({ id: 7, op: 'pause_generation', mode: 'sleep' });
    const bad = await h.answer(7);
    expect(bad.error.code).toBe('bad_request');
    expect(bad.error.message).toMatch(/^pause_generation: mode/);
    h.send({ id: 8, op: 'resume_generation', mode: 'drain' });
    expect((await h.answer(8)).error).toMatchObject({ code: 'bad_request', message: expect.stringContaining('mode') });
    h.end();
    await h.done;
  });

  it('shutdown cancels the in-flight next_batch, answers both, closes the coordinator and ends', async () => {
    const backend = scriptedBackend({ delay_ms: null });
    const h = harness(backend);
    h.send({ id: 'b', op: 'next_batch' });
    h.send({ id: 'later', op: 'update_weights' });
    await new Promise((r) => setTimeout(r, 20));
    h.send({ id: 'bye', op: 'shutdown' });
    await h.done;
    expect(h.lines.map((l) => [l.id, l.ok, l.error?.code])).toEqual([
      ['b', false, 'cancelled'],
      ['later', false, 'cancelled'],
      ['bye', true, undefined],
    ]);
    expect(backend.state).toMatchObject({ started: 1, closed: 1, open: 0 });
  });

  it('EOF on stdin cancels in-flight work and closes what was started', async () => {
    const backend = scriptedBackend({ delay_ms: null });
    const h = harness(backend);
    h.send({ id: 1, op: 'next_batch' });
    await new Promise((r) => setTimeout(r, 20));
    h.end();
    await h.done;
    expect(h.lines).toEqual([{ id: 1, ok: false, error: { code: 'cancelled', message: 'cancelled: stdin closed' } }]);
    expect(backend.state.open).toBe(0);
  });
});
