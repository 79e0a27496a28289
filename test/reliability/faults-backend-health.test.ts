// Backend health under real process faults: a `raas serve` child process
// with `raas sim-llm` child processes as backends. A backend SIGKILLed and restarted on its port, a
// backend SIGSTOPped (hung) and continued, a dead address registered beside a live one, and ProRL's
// clear + add weight update during RUN. Each case checks what a user sees: every job finishes, no new
// work goes to a backend while it is unhealthy, it comes back once it answers, and load and
// weight_version stay right for the jobs in flight.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { observe } from './helpers/observe.js';
import { cliProcess, postJson, request, serveProcess, tempDir, until, type ServeProcess } from './helpers/servers.js';

const chat = (id: string, turns: number) => ({
  job_id: id,
  instance: { data_source: 'chat', turns },
  sampling_params: { seed: 1, max_tokens_per_turn: 16 },
});
const moves = async (url: string) => Number(/raas_backend_moves_total (\d+)/.exec((await request(`${url}/metrics`)).text)?.[1] ?? 0);
const backendsOf = async (
  url: string,
): Promise<Array<{ address: string; healthy: boolean; active: number; assigned: number; weight_version: string }>> =>
  (await request(`${url}/status`)).body.backends;
const backendOf = async (url: string, address: string) => (await backendsOf(url)).find((b) => b.address === address);

describe('faults: LLM backend health with real processes', () => {
  const dir = tempDir('health');
  // 16 tokens at 40 ms each: a turn lasts about 0.65 s, long enough to hit a backend inside one.
  const simCfg = path.join(dir, 'sim.yaml');
  fs.writeFileSync(
    simCfg,
    'seed: 5\nlatency:\n  decode_ms_per_token: 40\nfiller:\n  median_tokens: 16\n  sigma: 0\n  min_tokens: 16\n  max_tokens: 16\n',
  );
  // Probes every 0.25 s with a 2 s timeout (a loaded 2-core machine can delay a live sim's answer);
  // two consecutive failures open a breaker. Deadlines stay at their defaults (60 s + 100 ms per
  // token): a hung backend is left through its breaker only.
  const serverCfg = path.join(dir, 'server.yaml');
  fs.writeFileSync(
    serverCfg,
    'llm:\n  retries: 3\n  backoff_base_ms: 50\n  backoff_max_ms: 200\n  unhealthy_after: 2\n  probe_interval_s: 0.25\n  probe_timeout_s: 2\n  max_moves: 3\nlog_level: warn\n',
  );
  const sims: ServeProcess[] = [];
  let server: ServeProcess | undefined;

  const sim = async (port = 0) => {
    const s = await cliProcess(['sim-llm', '--port', String(port), '--config', simCfg]);
    sims.push(s);
    return s;
  };
  const serve = async (backends: string[]) => {
    server = await serveProcess(['--config', serverCfg, ...(backends.length ? ['--llm', ...backends] : []), '--workers-run', '64']);
    return server.url;
  };

  afterEach(async () => {
    await server?.kill('SIGKILL');
    server = undefined;
    // SIGKILL ends a stopped process too.
    for (const s of sims.splice(0)) await s.kill('SIGKILL');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a backend SIGKILLed mid-RUN: its jobs move and finish, it gets no new work while down, and comes back when restarted on its port', async () => {
    const a = await sim();
    const b = await sim();
    const url = await serve([a.url, b.url]);
    const movesBefore = await moves(url);
    const wave1 = Array.from({ length: 12 }, (_, i) => postJson(`${url}/process`, chat(`kill-${i}`, 3), { timeoutMs: 60_000 }));
    await until(async () => (await backendsOf(url)).every((x) => x.active > 0), 'both backends busy');
    const killedAt = performance.now();
    await a.kill('SIGKILL');
    await until(async () => (await backendOf(url, a.url))?.healthy === false, 'killed backend marked unhealthy', 10_000);
    const markedS = (performance.now() - killedAt) / 1000;
    const r1 = await Promise.all(wave1);
    expect(r1.map((r) => r.body.critical_error)).toEqual(Array(12).fill(null));
    expect(r1.every((r) => r.body.backend === b.url)).toBe(true);
    const moved = (await moves(url)) - movesBefore;
    expect(moved).toBeGreaterThan(0);

    // While it is down, no new job is bound to it.
    const assignedWhileDown = (await backendOf(url, a.url))!.assigned;
    const wave2 = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postJson(`${url}/process`, chat(`down-${i}`, 1), { timeoutMs: 60_000 })),
    );
    expect(wave2.map((r) => r.body.critical_error)).toEqual(Array(8).fill(null));
    expect((await backendOf(url, a.url))!.assigned).toBe(assignedWhileDown);

    // Restarted on the same port: the probe brings it back and it takes jobs again.
    const port = Number(new URL(a.url).port);
    const a2 = await sim(port);
    const restartedAt = performance.now();
    expect(a2.url).toBe(a.url);
    await until(async () => (await backendOf(url, a.url))?.healthy === true, 'restarted backend healthy', 10_000);
    const backS = (performance.now() - restartedAt) / 1000;
    const wave3 = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postJson(`${url}/process`, chat(`back-${i}`, 1), { timeoutMs: 60_000 })),
    );
    expect(wave3.map((r) => r.body.critical_error)).toEqual(Array(8).fill(null));
    const onRestarted = wave3.filter((r) => r.body.backend === a.url).length;
    expect(onRestarted).toBeGreaterThan(0);
    observe({
      section: 'faults',
      name: 'LLM backend SIGKILLed mid-RUN and restarted on its port (raas serve process, two sim processes)',
      observed: `12/12 jobs in flight finished on the live backend, ${moved} moved; marked unhealthy ${markedS.toFixed(1)} s after the kill; while down 0 of 8 new jobs bound to it; restarted, healthy again ${backS.toFixed(1)} s after it listened (probe every 0.25 s), then took ${onRestarted} of 8 new jobs`,
      figures: { jobs: 28, lost_jobs: 0, hung_jobs: 0 },
    });
  }, 180_000);

  it('a backend SIGSTOPped (hung) mid-RUN: its breaker opens on probe timeouts, its calls end and the jobs finish elsewhere; SIGCONT brings it back', async () => {
    const a = await sim();
    const b = await sim();
    const url = await serve([a.url, b.url]);
    const movesBefore = await moves(url);
    const jobs = Array.from({ length: 10 }, (_, i) => postJson(`${url}/process`, chat(`stop-${i}`, 3), { timeoutMs: 120_000 }));
    await until(async () => (await backendsOf(url)).every((x) => x.active > 0), 'both backends busy');
    const onA = (await backendOf(url, a.url))!.active;
    const stoppedAt = performance.now();
    a.child.kill('SIGSTOP');
    await until(async () => (await backendOf(url, a.url))?.healthy === false, 'hung backend marked unhealthy', 20_000);
    const markedS = (performance.now() - stoppedAt) / 1000;
    const answers = await Promise.all(jobs);
    const doneS = (performance.now() - stoppedAt) / 1000;
    expect(answers.map((r) => r.body.critical_error)).toEqual(Array(10).fill(null));
    expect(answers.every((r) => r.body.backend === b.url)).toBe(true);
    const moved = (await moves(url)) - movesBefore;
    expect(moved).toBeGreaterThanOrEqual(1);
    // No call waited for its deadline (60 s + 1.6 s for 16 tokens): the breaker ended them.
    expect(doneS).toBeLessThan(60);
    expect((await backendOf(url, a.url))!.active).toBe(0);

    a.child.kill('SIGCONT');
    await until(async () => (await backendOf(url, a.url))?.healthy === true, 'continued backend healthy', 10_000);
    const after = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postJson(`${url}/process`, chat(`cont-${i}`, 1), { timeoutMs: 60_000 })),
    );
    expect(after.map((r) => r.body.critical_error)).toEqual(Array(8).fill(null));
    expect(after.some((r) => r.body.backend === a.url)).toBe(true);
    observe({
      section: 'faults',
      name: 'LLM backend SIGSTOPped (hung) mid-RUN, then SIGCONT',
      observed: `${onA} of 10 jobs were bound to it; marked unhealthy ${markedS.toFixed(1)} s after SIGSTOP (2 probe timeouts of 2 s); all 10 finished on the other backend ${doneS.toFixed(1)} s after SIGSTOP, ${moved} moved; after SIGCONT healthy again and took new jobs`,
      figures: { jobs: 18, lost_jobs: 0, hung_jobs: 0 },
    });
  }, 180_000);

  it('a dead address registered beside a live one: every job finishes on the live one, and once its breaker is open the dead one gets no job and costs no move', async () => {
    // The live one first: started after the kill, it could be given the freed port.
    const live = await sim();
    const dead = await sim();
    const deadUrl = dead.url;
    await dead.kill('SIGKILL');
    const url = await serve([deadUrl, live.url]);
    const m0 = await moves(url);
    const wave1 = await Promise.all(
      Array.from({ length: 22 }, (_, i) => postJson(`${url}/process`, chat(`dead-${i}`, 1), { timeoutMs: 60_000 })),
    );
    const m1 = await moves(url);
    // Before the breaker, 8 of 22 jobs went to the dead address, each paying 1-1.4 s of retries, and 2 failed.
    expect(wave1.map((r) => r.body.critical_error)).toEqual(Array(22).fill(null));
    expect(wave1.every((r) => r.body.backend === live.url)).toBe(true);
    const d = (await backendOf(url, deadUrl))!;
    expect(d).toMatchObject({ healthy: false, active: 0 });
    // Idle, the dead one would be the least loaded: still no job goes there.
    const wave2 = await Promise.all(
      Array.from({ length: 22 }, (_, i) => postJson(`${url}/process`, chat(`dead2-${i}`, 1), { timeoutMs: 60_000 })),
    );
    expect(wave2.map((r) => r.body.critical_error)).toEqual(Array(22).fill(null));
    expect((await backendOf(url, deadUrl))!.assigned).toBe(d.assigned);
    expect(await moves(url)).toBe(m1);
    observe({
      section: 'faults',
      name: 'a dead LLM backend address registered beside a live one',
      observed: `44/44 jobs finished on the live backend; first wave: ${d.assigned} bound to the dead address before its breaker opened (2 failures of calls or probes), ${m1 - m0} moved; second wave: 0 bound to it, 0 moved; /status shows it healthy: false`,
      figures: { jobs: 44, lost_jobs: 0, hung_jobs: 0 },
    });
  }, 120_000);

  it('clear + add during RUN (ProRL weight update): load stays on /status and later turns carry the new weight_version', async () => {
    const a = await sim();
    const url = await serve([]);
    await postJson(`${url}/add_llm_server`, { address: a.url, weight_version: 'v1' });
    const jobs = Array.from({ length: 6 }, (_, i) => postJson(`${url}/process`, chat(`wu-${i}`, 3), { timeoutMs: 60_000 }));
    await until(async () => (await request(`${url}/status`)).body.run === 6, 'jobs in RUN');
    expect((await backendOf(url, a.url))!.active).toBe(6);
    // Into the first turn (about 0.65 s each), so the update lands between turns 1 and 2.
    await new Promise((r) => setTimeout(r, 250));
    expect((await postJson(`${url}/clear_llm_server`, {})).body.backends).toEqual([]);
    const added = (await postJson(`${url}/add_llm_server`, { address: a.url, weight_version: 'v2' })).body.backends;
    expect(added).toMatchObject([{ address: a.url, weight_version: 'v2', active: 6 }]);
    const answers = await Promise.all(jobs);
    for (const r of answers) {
      expect(r.body.critical_error).toBeNull();
      const wv: string[] = r.body.weight_versions;
      expect(wv).toHaveLength(3);
      // Turns started before the update are v1, every turn after it v2; never v1 after v2.
      expect(wv[2]).toBe('v2');
      expect(wv.slice(wv.indexOf('v2')).every((v) => v === 'v2')).toBe(true);
    }
    expect(answers.some((r) => r.body.weight_versions[0] === 'v1')).toBe(true);
    expect((await backendOf(url, a.url))!).toMatchObject({ active: 0, weight_version: 'v2' });
    observe({
      section: 'faults',
      name: 'clear_llm_server + add_llm_server during RUN (ProRL weight update)',
      observed: `6 jobs in RUN: /status showed active 6 right after the re-add (was 0 before the fix); weight_versions ${JSON.stringify([...new Set(answers.map((r) => r.body.weight_versions.join(',')))])}; active 0 once they ended`,
      figures: { jobs: 6, lost_jobs: 0, hung_jobs: 0 },
    });
  }, 120_000);
});
