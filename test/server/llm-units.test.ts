// The LLM layer's rules that need no network: address normalisation, length limits, the metadata
// backoff, the routing heap (least loaded, affinity, assigned, round robin, removal), the per-call
// deadline, and the circuit breaker with its probe on a hand-driven clock.
import { describe, expect, it } from 'vitest';
import { LlmPoolConfig } from '../../src/protocol/config-server.js';
import { normalizeAddress } from '../../src/server/llm/http.js';
import { lengthLimits, nextMaxTokens } from '../../src/server/llm/limits.js';
import { BackendMetadata } from '../../src/server/llm/metadata.js';
import { BackendPool } from '../../src/server/llm/pool.js';
import { BackendHealth, type Watched } from '../../src/server/llm/health.js';
import type { BackendClient } from '../../src/server/llm/types.js';
import { ManualClock, flush } from './helpers.js';

/** A backend client whose /health answer the test sets (generate is never reached by the pool). */
class ProbeClient implements BackendClient {
  readonly api = 'vllm' as const;
  up = true;
  probes = 0;
  constructor(readonly address: string) {}
  async generate(): Promise<never> {
    throw new Error('not used');
  }
  async maxModelLen(): Promise<number | undefined> {
    return undefined;
  }
  async probe(): Promise<void> {
    this.probes++;
    if (!this.up) throw new Error(`${this.address} refused`);
  }
}

/** Random draws in a fixed sequence, so ties are decided by the test. */
function draws(...xs: number[]): () => number {
  let i = 0;
  return () => xs[i++ % xs.length];
}

describe('normalizeAddress', () => {
  it('adds http://, drops trailing slashes and a /v1 suffix, keeps https', () => {
    expect(normalizeAddress(' host:8000 ')).toBe('http://host:8000');
    expect(normalizeAddress('http://h:1/v1/')).toBe('http://h:1');
    expect(normalizeAddress('HTTPS://h:1//')).toBe('HTTPS://h:1');
    expect(normalizeAddress('http://h:1/v1x')).toBe('http://h:1/v1x');
  });
});

describe('length limits', () => {
  it('reads per-turn and trajectory limits, with aliases and handler defaults', () => {
    expect(lengthLimits({})).toEqual({ perTurn: 1024, response: Number.POSITIVE_INFINITY });
    expect(lengthLimits({}, { max_tokens_per_turn: 7, max_response_tokens: 9 })).toEqual({ perTurn: 7, response: 9 });
    expect(lengthLimits({ max_output_tokens: 5 } as never, { max_tokens_per_turn: 7 })).toEqual({
      perTurn: 5,
      response: Number.POSITIVE_INFINITY,
    });
    expect(lengthLimits({ max_tokens_per_turn: 3, max_output_tokens: 5, max_response_tokens: 11 } as never)).toEqual({
      perTurn: 3,
      response: 11,
    });
  });

  it('takes the smallest of per-turn, what the trajectory has left and what the context has left, and names it', () => {
    const L = { perTurn: 100, response: 1000 };
    expect(nextMaxTokens(L, 0, 10, undefined)).toEqual({ max_tokens: 100, cause: 'per_turn' });
    expect(nextMaxTokens(L, 950, 10, undefined)).toEqual({ max_tokens: 50, cause: 'response' });
    expect(nextMaxTokens(L, 900, 10, undefined)).toEqual({ max_tokens: 100, cause: 'per_turn' }); // equal: per-turn
    expect(nextMaxTokens(L, 0, 970, 1000)).toEqual({ max_tokens: 30, cause: 'model_len' });
    expect(nextMaxTokens(L, 0, 900, 1000)).toEqual({ max_tokens: 100, cause: 'per_turn' }); // equal: per-turn
    expect(nextMaxTokens(L, 960, 970, 1000)).toEqual({ max_tokens: 30, cause: 'model_len' });
    expect(nextMaxTokens(L, 980, 960, 1000)).toEqual({ max_tokens: 20, cause: 'response' });
    expect(nextMaxTokens(L, 1000, 0, 1000)).toEqual({ finish: 'max_response_tokens' });
    expect(nextMaxTokens(L, 1001, 0, 1000)).toEqual({ finish: 'max_response_tokens' });
    expect(nextMaxTokens(L, 0, 1000, 1000)).toEqual({ finish: 'max_model_len' });
    expect(nextMaxTokens(L, 999, 999, 1000)).toEqual({ max_tokens: 1, cause: 'response' });
  });
});

describe('backend metadata', () => {
  it('backs off after failures, doubling up to retryMaxMs, and keeps the first success', async () => {
    let t = 0;
    let calls = 0;
    let ok = false;
    const m = new BackendMetadata(
      async () => {
        calls++;
        if (!ok) throw new Error('down');
        return 42;
      },
      { retryMs: 100, retryMaxMs: 250, clock: { now: () => t } },
    );
    expect(m.isKnown).toBe(false);
    expect(await m.get()).toBeUndefined();
    expect(calls).toBe(1);
    t = 99;
    expect(await m.get()).toBeUndefined(); // within 100 ms
    expect(calls).toBe(1);
    t = 100;
    expect(await m.get()).toBeUndefined(); // fetched again at the end of the window, failed again
    expect(calls).toBe(2);
    t = 299;
    await m.get();
    expect(calls).toBe(2); // second window is 200 ms
    t = 300;
    await m.get();
    expect(calls).toBe(3);
    t = 549;
    await m.get();
    expect(calls).toBe(3); // third window capped at 250 ms
    t = 550;
    ok = true;
    expect(await m.get()).toBe(42);
    expect(m.isKnown).toBe(true);
    expect(await m.get()).toBe(42);
    m.refresh();
    expect(calls).toBe(4); // known: neither get nor refresh fetches again
  });

  it('shares one fetch among concurrent callers; a caller whose signal aborts stops waiting alone', async () => {
    let release!: (v: number) => void;
    let calls = 0;
    const m = new BackendMetadata<number>(() => {
      calls++;
      return new Promise((r) => (release = r));
    });
    const ac = new AbortController();
    const a = m.get(ac.signal);
    const b = m.get();
    m.refresh(); // a fetch is running: no second one
    ac.abort(new Error('job cancelled'));
    await expect(a).rejects.toThrow('job cancelled');
    await expect(m.get(ac.signal)).rejects.toThrow('job cancelled');
    release(7);
    expect(await b).toBe(7);
    expect(calls).toBe(1);
  });

  it('gives each fetch its own deadline (timeoutMs), independent of the callers', async () => {
    let seen: AbortSignal | undefined;
    const m = new BackendMetadata<number>(
      (signal) => {
        seen = signal;
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      },
      { timeoutMs: 30 },
    );
    expect(await m.get()).toBeUndefined();
    expect(seen?.aborted).toBe(true);
  });
});

describe('routing', () => {
  const cfg = (over: Record<string, unknown> = {}) => LlmPoolConfig.parse(over);
  const pool = (over: Record<string, unknown> = {}, random = draws(0.5)) =>
    new BackendPool(cfg(over), (a) => new ProbeClient(a), random, { clock: new ManualClock() });

  it('binds each job to the least-loaded backend (active jobs) and balances as jobs come and go', () => {
    const p = pool({ group_affinity: false });
    const a = p.add('a:1');
    const b = p.add('b:1');
    expect(p.size).toBe(2);
    const x = p.acquire()!;
    const y = p.acquire()!;
    expect(new Set([x, y])).toEqual(new Set([a, b]));
    expect([a.active, b.active]).toEqual([1, 1]);
    p.release(a);
    expect(p.acquire()).toBe(a);
    expect([a.assigned, b.assigned]).toEqual([2, 1]);
    p.release(a);
    p.release(a); // a release never drives the load below 0
    expect(a.active).toBe(0);
    expect(p.list().map((i) => [i.address, i.active, i.assigned, i.healthy, i.weight_version, i.api])).toEqual([
      ['http://a:1', 0, 2, true, 'default', 'vllm'],
      ['http://b:1', 1, 1, true, 'default', 'vllm'],
    ]);
  });

  it('routing "assigned" keys on assignments since registration, not on live load', () => {
    const p = pool({ routing: 'assigned', group_affinity: false });
    const a = p.add('a:1');
    const b = p.add('b:1');
    const first = p.acquire()!;
    p.release(first);
    const other = first === a ? b : a;
    expect(p.key(first)).toBe(1);
    expect(p.acquire()).toBe(other); // first has no live job but one assignment
  });

  it('keeps a group on its backend while within affinity_margin of the least loaded, then moves it', () => {
    const p = pool({ affinity_margin: 2 });
    const a = p.add('a:1');
    const b = p.add('b:1');
    const g = p.acquire('g')!;
    const other = g === a ? b : a;
    expect(p.acquire('g')).toBe(g); // 1 vs 0: within 2
    expect(p.acquire('g')).toBe(g); // 2 vs 0: within 2
    expect(p.acquire('g')).toBe(other); // 3 vs 0: too far
    expect(p.groupBackend('g')).toBe(other);
    expect(p.acquire('h')).toBe(other); // no affinity: least loaded (1 < 3)
    // the group's binding ends with its last job
    for (let i = 0; i < 3; i++) p.release(g, 'g');
    p.release(other, 'g');
    expect(p.groupBackend('g')).toBeUndefined();
  });

  it('without group_affinity a group has no backend of its own', () => {
    const p = pool({ group_affinity: false });
    p.add('a:1');
    p.acquire('g');
    expect(p.groupBackend('g')).toBeUndefined();
  });

  it('skips excluded backends (ones that stopped answering for this job)', () => {
    const p = pool({ group_affinity: false }, draws(0.1, 0.9, 0.5));
    const a = p.add('a:1');
    const b = p.add('b:1');
    const c = p.add('c:1');
    expect(p.acquire(undefined, new Set([a, b]))).toBe(c);
    p.release(c);
    const pick = p.acquire(undefined, new Set([p.anyHealthy()!]))!;
    expect(pick).not.toBe(undefined);
    expect(p.acquire(undefined, new Set([a, b, c]))).toBeUndefined();
  });

  it('round_robin cycles over the healthy registered backends per request', () => {
    const p = pool({ routing: 'round_robin' });
    const a = p.add('a:1');
    const b = p.add('b:1');
    const seq = [p.nextRoundRobin(), p.nextRoundRobin(), p.nextRoundRobin()];
    expect(seq).toEqual([a, b, a]);
    expect(a.active).toBe(2);
    expect(p.nextRoundRobin(new Set([a, b]))).toBeUndefined();
    expect(p.nextRoundRobin(new Set([a]))).toBe(b);
  });

  it('re-adding an address updates its weight_version and api; a removed one gets no new job but keeps its load', () => {
    const p = pool({ group_affinity: false });
    const a = p.add('http://a:1/v1', 'vllm', 'v1');
    expect(p.add('a:1')).toBe(a);
    expect(a.weightVersion).toBe('v1'); // no version given: unchanged
    expect(p.add('a:1', 'vllm', 'v2').weightVersion).toBe('v2');
    const oldClient = a.client;
    p.add('a:1', 'sglang');
    expect(a.api).toBe('sglang');
    expect(a.client).not.toBe(oldClient);
    expect(p.get('a:1/')).toBe(a);
    expect(p.acquire()).toBe(a);
    expect(p.remove('a:1')).toBe(true);
    expect(p.remove('a:1')).toBe(false);
    expect(p.get('a:1')).toBeUndefined();
    expect(p.size).toBe(0);
    expect(p.acquire()).toBeUndefined();
    expect(p.anyHealthy()).toBeUndefined();
    // re-added while a job still holds it: the same backend, its load kept, its version reset
    const again = p.add('a:1');
    expect(again).toBe(a);
    expect(again.active).toBe(1);
    expect(again.weightVersion).toBe('default');
    expect(p.acquire()).toBe(a);
  });

  it('clear removes every backend', () => {
    const p = pool();
    p.add('a:1');
    p.add('b:1');
    p.clear();
    expect(p.size).toBe(0);
    expect(p.list()).toEqual([]);
  });

  it("a call's deadline is deadline_base_s + max_tokens × deadline_per_token_ms, capped by request_timeout_s", () => {
    const p = pool({ deadline_base_s: 2, deadline_per_token_ms: 10, request_timeout_s: 5 });
    expect(p.deadlineMs(100)).toBe(3000);
    expect(p.deadlineMs(300)).toBe(5000);
    expect(p.deadlineMs(1000)).toBe(5000);
  });
});

describe('circuit breaker', () => {
  function setup(over: Record<string, unknown> = {}) {
    const clock = new ManualClock();
    const log: string[] = [];
    const p = new BackendPool(
      LlmPoolConfig.parse({ unhealthy_after: 2, probe_interval_s: 1, group_affinity: false, ...over }),
      (a) => new ProbeClient(a),
      Math.random,
      {
        clock,
        log: { info: (_o: unknown, m: string) => log.push(`info ${m}`), warn: (_o: unknown, m: string) => log.push(`warn ${m}`) } as never,
      },
    );
    return { p, clock, log };
  }

  it('opens after unhealthy_after consecutive failures, aborts the calls in flight, and a success in between resets the count', async () => {
    const { p, log } = setup();
    const a = p.add('a:1');
    const b = p.add('b:1');
    p.failed(a, new Error('refused 1'));
    p.succeeded(a);
    expect(a.failures).toBe(0);
    p.failed(a, new Error('refused 2'));
    expect(a.healthy).toBe(true);
    const call = new AbortController();
    a.calls.add(call);
    p.failed(a, new Error('refused 3'));
    expect(a.healthy).toBe(false);
    expect(a.lastError).toBe('refused 3');
    expect(call.signal.aborted).toBe(true);
    expect(String((call.signal.reason as Error).message)).toContain('marked unhealthy after 2 consecutive failures (last: refused 3)');
    expect(p.unhealthy()).toEqual([a]);
    expect(log.some((l) => l.startsWith('warn LLM backend marked unhealthy'))).toBe(true);
    expect(p.acquire()).toBe(b);
    expect(p.acquire()).toBe(b); // never the idle unhealthy one
    expect(p.list().find((i) => i.address === a.address)?.healthy).toBe(false);
    p.succeeded(a); // a call that answers closes it again
    expect(a.healthy).toBe(true);
    expect(p.unhealthy()).toEqual([]);
    expect(log.some((l) => l.startsWith('info LLM backend answers again'))).toBe(true);
  });

  it('probes every backend at once and every probe_interval_s; a probe answer brings an open backend back half-open', async () => {
    const { p, clock } = setup({ unhealthy_after: 3 });
    const a = p.add('a:1');
    const client = a.client as ProbeClient;
    await clock.advance(1, 1);
    await flush();
    expect(client.probes).toBe(1);
    client.up = false;
    await clock.advance(3000, 100);
    expect(client.probes).toBe(4);
    expect(a.healthy).toBe(false);
    expect(a.failures).toBe(3);
    client.up = true;
    await clock.advance(1000, 100);
    expect(a.healthy).toBe(true);
    expect(a.failures).toBe(2); // half-open: one more failure opens it
    p.failed(a, new Error('again'));
    expect(a.healthy).toBe(false);
    // a probe that answers does not reset the count of a healthy backend
    p.succeeded(a);
    expect(a.failures).toBe(0);
    await clock.advance(1000, 100);
    expect(a.failures).toBe(0);
    // a removed backend is no longer probed
    p.remove('a:1');
    const before = client.probes;
    await clock.advance(5000, 500);
    expect(client.probes).toBe(before);
    p.close();
    p.close();
  });

  it('a success or a resume tells the pool a backend is back only when it was out', async () => {
    const { p, log } = setup({ unhealthy_after: 2 });
    const a = p.add('a:1');
    p.failed(a, new Error('once'));
    p.succeeded(a);
    p.suspendHealth();
    p.resumeHealth();
    expect(log.filter((l) => l.includes('answers again'))).toEqual([]);
    p.close();
  });

  it('watches each backend once, only while open, and close() ends every probe loop', async () => {
    const clock = new ManualClock();
    const mk = (address: string) => {
      const c = new ProbeClient(address);
      return { address, client: c as BackendClient, healthy: true, failures: 0, lastError: null as string | null, c };
    };
    const h = new BackendHealth({ unhealthy_after: 3, probe_interval_s: 1, probe_timeout_s: 1 }, clock, {
      opened: () => {},
      closed: () => {},
    });
    const a = mk('a');
    const b = mk('b');
    h.watch(a);
    h.watch(a);
    h.watch(b);
    await clock.advance(1, 1);
    expect([a.c.probes, b.c.probes]).toEqual([1, 1]);
    await clock.advance(1000, 100);
    expect([a.c.probes, b.c.probes]).toEqual([2, 2]);
    h.unwatch(a);
    h.unwatch(a);
    await clock.advance(1000, 100);
    expect([a.c.probes, b.c.probes]).toEqual([2, 3]);
    h.close();
    await clock.advance(3000, 100);
    expect(b.c.probes).toBe(3);
    h.watch(a);
    await clock.advance(2000, 100);
    expect(a.c.probes).toBe(2);
    // a client without probe() is never probed
    const bare = {
      address: 'n',
      client: {
        address: 'n',
        api: 'vllm',
        generate: async () => {
          throw new Error();
        },
        maxModelLen: async () => undefined,
      } as BackendClient,
      healthy: true,
      failures: 0,
      lastError: null,
    };
    const h2 = new BackendHealth({ unhealthy_after: 1, probe_interval_s: 1, probe_timeout_s: 1 }, clock, {
      opened: () => {},
      closed: () => {},
    });
    h2.watch(bare);
    h2.unwatch(bare);
    h2.close();
  });

  it('while suspended (generation paused) failures do not count; resume starts every breaker afresh', async () => {
    const { p } = setup({ unhealthy_after: 1 });
    const a = p.add('a:1');
    p.suspendHealth();
    p.failed(a, new Error('asleep'));
    expect(a.failures).toBe(0);
    expect(a.healthy).toBe(true);
    p.resumeHealth();
    p.failed(a, new Error('gone'));
    expect(a.healthy).toBe(false);
    p.suspendHealth();
    p.resumeHealth();
    expect(a.healthy).toBe(true);
    expect(a.failures).toBe(0);
    p.close();
  });

  it('a probe answer that arrives after the backend was removed does not count', async () => {
    const clock = new ManualClock();
    let finishProbe!: (ok: boolean) => void;
    const b: Watched & { client: BackendClient } = {
      address: 'x',
      healthy: false,
      failures: 5,
      lastError: 'x',
      client: {
        address: 'x',
        api: 'vllm',
        generate: async () => {
          throw new Error();
        },
        maxModelLen: async () => undefined,
        probe: () => new Promise<void>((res, rej) => (finishProbe = (ok) => (ok ? res() : rej(new Error('no'))))),
      },
    };
    const closed: string[] = [];
    const h = new BackendHealth({ unhealthy_after: 3, probe_interval_s: 1, probe_timeout_s: 1 }, clock, {
      opened: () => closed.push('opened'),
      closed: () => closed.push('closed'),
    });
    h.watch(b);
    h.watch(b); // watching twice starts one probe loop
    await clock.advance(1, 1);
    h.unwatch(b);
    finishProbe(true);
    await flush();
    expect(b.healthy).toBe(false);
    expect(closed).toEqual([]);
    h.close();
    h.watch(b); // closed: no more probes
    await clock.advance(2000, 500);
    expect(closed).toEqual([]);
  });
});
