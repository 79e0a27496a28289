// The fault matrix of a training run: real processes — `raas serve` rollout
// servers and `raas sim-llm` backends as child processes, the coordinator in this process or as a
// `raas train` child — and faults injected while a run trains: a rollout server SIGKILLed with
// backends configured and weight updates continuing; a backend SIGKILLed, restarted on its port,
// SIGSTOPped (hung) and continued; ProRL's clear + add at every weight update with jobs in RUN; and
// the end-to-end case, a 3-step `raas train` that loses a server after its first step and a
// backend during its second. Every case checks what a user sees: every step arrives complete, no
// rollout is lost or failed, weight versions stay right, and nothing is left running.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/dapo/index.js';
import type { Batch } from '../../src/protocol/batch.js';
import { observe } from './helpers/observe.js';
import { alive, descendantsOf, processTable, waitGone } from '../helpers/procs.js';
import { CLI, cliProcess, request, serveProcess, tempDir, until, type ServeProcess } from './helpers/servers.js';

type BackendRow = { address: string; healthy: boolean; active: number; assigned: number; weight_version: string };
const statusOf = async (url: string) =>
  (await request(`${url}/status`, { timeoutMs: 5000 })).body as { run: number; pending_jobs: number; backends: BackendRow[] };
const backendOn = async (server: string, address: string) => (await statusOf(server)).backends.find((b) => b.address === address);
const moves = async (url: string) => Number(/raas_backend_moves_total (\d+)/.exec((await request(`${url}/metrics`)).text)?.[1] ?? 0);

/** Every rollout of every batch: ended without a critical error, turns labelled with versions that never go down and never precede the submission. */
function checkBatches(batches: Batch[], steps: number, B: number, n: number): { rollouts: number; straddled: number } {
  expect(batches.map((b) => b.step)).toEqual(Array.from({ length: steps }, (_, i) => i));
  const ids = new Set<string>();
  let rollouts = 0;
  let straddled = 0;
  for (const b of batches) {
    expect(b.groups).toHaveLength(B);
    expect(b.stats.errors).toBe(0);
    for (const g of b.groups) {
      expect(g.rollouts).toHaveLength(n);
      for (const r of g.rollouts) {
        rollouts++;
        expect(ids.has(r.job_id)).toBe(false);
        ids.add(r.job_id);
        expect(r.finish_reason).toBe('finish');
        const wv = r.weight_versions.map(Number);
        for (let k = 0; k < wv.length; k++) {
          expect(wv[k]).toBeGreaterThanOrEqual(r.policy_version);
          if (k > 0) expect(wv[k]).toBeGreaterThanOrEqual(wv[k - 1]);
        }
        if (new Set(wv).size > 1) straddled++;
      }
    }
  }
  return { rollouts, straddled };
}

describe('faults: a training run over a live fleet (fault matrix, real processes)', () => {
  const dir = tempDir('matrix');
  const dataset = path.join(dir, 'chat.jsonl');
  const rates = [0.5, 0.3, 0.7, 0.5, 0.6];
  fs.writeFileSync(
    dataset,
    Array.from({ length: 300 }, (_, i) =>
      JSON.stringify({ data_source: 'chat', instance_id: `c${i}`, turns: 1 + (i % 2), pass_rate: rates[i % rates.length] }),
    ).join('\n') + '\n',
  );
  // 12 tokens at 25 ms: a turn lasts about 0.3 s, so faults land while calls are in flight.
  const simCfg = path.join(dir, 'sim.yaml');
  fs.writeFileSync(
    simCfg,
    `latency:\n  decode_ms_per_token: 25\nfiller:\n  median_tokens: 12\n  sigma: 0\n  min_tokens: 12\n  max_tokens: 12\ndatasets: ["${dataset}"]\n`,
  );
  // Breakers open after 2 failures; probes every 0.25 s (2 s timeout, for a loaded 2-core machine).
  const serverCfg = path.join(dir, 'server.yaml');
  fs.writeFileSync(
    serverCfg,
    'llm:\n  retries: 3\n  backoff_base_ms: 50\n  backoff_max_ms: 200\n  unhealthy_after: 2\n  probe_interval_s: 0.25\n  probe_timeout_s: 2\n  max_moves: 3\nlog_level: warn\n',
  );
  const children: ServeProcess[] = [];

  const sim = async (port = 0): Promise<ServeProcess> => {
    const s = await cliProcess(['sim-llm', '--port', String(port), '--seed', '3', '--config', simCfg]);
    children.push(s);
    return s;
  };
  const serve = async (): Promise<ServeProcess> => {
    const s = await serveProcess(['--config', serverCfg, '--workers-run', '8']);
    children.push(s);
    return s;
  };
  /** Starts `servers` rollout servers and `sims` backends at once (process start dominates on a loaded machine). */
  const fleet = async (servers: number, sims: number) => {
    const all = await Promise.all([...Array.from({ length: servers }, () => serve()), ...Array.from({ length: sims }, () => sim())]);
    return { servers: all.slice(0, servers), sims: all.slice(servers) };
  };
  const coordinatorConfig = (name: string, servers: ServeProcess[], sims: ServeProcess[], steps: number) => ({
    name,
    seed: 7,
    servers: servers.map((s) => ({ url: s.url })),
    backends: sims.map((s) => s.url),
    dataset: { path: dataset },
    n: 4,
    batch_size: 3,
    max_staleness: 1,
    steps,
    health_interval_ms: 200,
  });

  afterEach(async () => {
    // SIGKILL ends a stopped process too.
    for (const c of children.splice(0)) await c.kill('SIGKILL');
  });
  afterAll(async () => {
    // Nothing this file started is left: no server, simulator, `raas train` or trainer command.
    expect(await waitGone(() => descendantsOf(process.pid).filter((p) => p.cmd.includes(CLI) || p.cmd.includes(dir)))).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a rollout server SIGKILLed mid-run with backends configured: weight updates go on over the survivor and training finishes', async () => {
    const {
      servers: [s1, s2],
      sims,
    } = await fleet(2, 2);
    const c = new Coordinator(coordinatorConfig('m-srv', [s1, s2], sims, 4));
    const batches: Batch[] = [];
    try {
      // The handover admits the next groups at once, onto both servers: the kill lands on jobs in flight.
      batches.push(await c.nextBatch());
      await until(() => c.status().servers.every((s) => s.in_flight > 0), 'jobs in flight on both servers');
      const onKilled = c.status().servers[1].in_flight;
      await s2.kill('SIGKILL');
      for (let step = 1; step < 4; step++) {
        await c.updateWeights({}); // threw "placement not fully applied" before
        batches.push(await c.nextBatch({ timeout_s: 60 }));
      }
      const { rollouts } = checkBatches(batches, 4, 3, 4);
      const st = c.status();
      expect(st.policy_version).toBe(3);
      expect(st.servers.map((s) => s.healthy)).toEqual([true, false]);
      expect(st.max_inflight_jobs).toBe(8); // the survivor's workers only
      expect(st.totals.dropped_error).toBe(0);
      // Both backends were placed onto the survivor at the last update's version.
      expect((await statusOf(s1.url)).backends.map((b) => `${b.address}@${b.weight_version}`).sort()).toEqual(
        sims.map((s) => `${s.url}@3`).sort(),
      );
      observe({
        section: 'faults',
        name: 'rollout server SIGKILLed mid-run, two backends configured, weight updates continuing (coordinator over two raas serve processes)',
        observed: `${onKilled} jobs were in flight on the killed server; 4/4 steps of 3 groups arrived (${rollouts} rollouts, 0 failed, 0 dropped groups); the 3 weight updates after the kill placed both backends on the survivor (weight_version 3); the cap fell to the survivor's 8 workers`,
        figures: { jobs: st.totals.jobs_submitted, lost_jobs: 0 },
      });
    } finally {
      await c.close();
    }
  }, 90_000);

  it('a backend SIGKILLed, restarted on its port, SIGSTOPped (hung) and continued during training: jobs move off, none is lost, its breaker closes again each time', async () => {
    const {
      servers: [s],
      sims: [a, b],
    } = await fleet(1, 2);
    const c = new Coordinator(coordinatorConfig('m-llm', [s], [a, b], 6));
    const batches: Batch[] = [];
    const m0 = await moves(s.url);
    const batch = async (): Promise<void> => {
      batches.push(await c.nextBatch({ timeout_s: 60 }));
    };
    const update = async (): Promise<void> => {
      await c.updateWeights({});
    };
    let last = '';
    // Jobs bound to A right now (a handover has just admitted groups, so some are in flight).
    const busy = () =>
      until(
        async () => {
          const st = await statusOf(s.url);
          last = JSON.stringify(st.backends);
          return (st.backends.find((x) => x.address === a.url)?.active ?? 0) > 0;
        },
        'jobs on backend A',
        20_000,
      ).catch((e: Error) => {
        throw new Error(`${e.message}: ${last}; coordinator ${JSON.stringify(c.status())}`);
      });
    const health = (want: boolean, what: string) => until(async () => (await backendOn(s.url, a.url))?.healthy === want, what, 20_000);
    try {
      await batch();
      await busy();
      await a.kill('SIGKILL');
      await health(false, 'killed backend unhealthy');
      await update(); // re-registers the dead address: it stays unhealthy and gets no job
      const assignedDown = (await backendOn(s.url, a.url))!.assigned;
      await batch();
      await update();
      await batch();
      await update();
      expect((await backendOn(s.url, a.url))!.assigned).toBe(assignedDown);

      const a2 = await sim(Number(new URL(a.url).port));
      expect(a2.url).toBe(a.url);
      await health(true, 'restarted backend healthy');
      await batch(); // its handover admits new groups: they reach the restarted backend
      await busy();
      a2.child.kill('SIGSTOP');
      await health(false, 'hung backend unhealthy');
      await update();
      await batch();
      await update();
      a2.child.kill('SIGCONT');
      await health(true, 'continued backend healthy');
      await batch();
      const moved = (await moves(s.url)) - m0;
      const { rollouts } = checkBatches(batches, 6, 3, 4);
      expect(moved).toBeGreaterThan(0);
      expect(c.status().totals.dropped_error).toBe(0);
      observe({
        section: 'faults',
        name: 'LLM backend SIGKILLed, restarted on its port, SIGSTOPped (hung) and continued during training (one raas serve, two sim processes, weight updates every step)',
        observed: `6/6 steps of 3 groups arrived (${rollouts} rollouts, 0 failed, 0 dropped groups); ${moved} jobs moved off the dead or hung backend; while down it got 0 new jobs, weight updates included; its breaker closed again after the restart and after SIGCONT`,
        figures: { jobs: c.status().totals.jobs_submitted, lost_jobs: 0, hung_jobs: 0 },
      });
    } finally {
      await c.close();
    }
  }, 90_000);

  it('clear + add at every weight update (placement_mode: replace) with jobs in RUN: load and weight_version stay right for them', async () => {
    const {
      servers: [s],
      sims,
    } = await fleet(1, 2);
    const c = new Coordinator({ ...coordinatorConfig('m-clr', [s], sims, 4), placement_mode: 'replace' });
    const batches: Batch[] = [];
    const seen: string[] = [];
    try {
      for (let step = 0; step < 4; step++) {
        batches.push(await c.nextBatch({ timeout_s: 60 }));
        if (step === 3) break;
        await c.updateWeights({});
        // Right after the clear + add: every job in RUN is counted on a backend, each at the new version.
        const st = await statusOf(s.url);
        seen.push(`${st.run} in RUN, active ${st.backends.map((x) => x.active).join('+')}`);
        expect(st.backends.map((x) => x.weight_version)).toEqual([String(step + 1), String(step + 1)]);
        expect(st.backends.reduce((n, x) => n + x.active, 0)).toBe(st.run);
      }
      const { rollouts, straddled } = checkBatches(batches, 4, 3, 4);
      // Jobs in flight through an update: their turns after it carry the new version.
      expect(straddled).toBeGreaterThan(0);
      await c.close();
      await until(async () => (await statusOf(s.url)).backends.every((x) => x.active === 0), 'load back to 0 once the jobs ended');
      observe({
        section: 'faults',
        name: 'clear_llm_server + add_llm_server at every weight update with jobs in RUN (coordinator, placement_mode: replace)',
        observed: `after each update /status counted every job in RUN on a backend (${seen.join('; ')}) at the new weight_version; ${straddled} of ${rollouts} rollouts ran through an update, their later turns labelled with the new version, none lower than its submission; load 0 once they ended`,
        figures: { jobs: c.status().totals.jobs_submitted, lost_jobs: 0 },
      });
    } finally {
      await c.close();
    }
  }, 90_000);

  it('raas train (3 steps, two raas serve, two raas sim-llm): one server SIGKILLed after the first step, one backend SIGKILLed and restarted; every step finishes and nothing is left running', async () => {
    const {
      servers: [s1, s2],
      sims: [a, b],
    } = await fleet(2, 2);
    // The trainer command marks that a step's batch is out and waits for the test's go: faults land while jobs run.
    const gate = path.join(dir, 'gate');
    fs.mkdirSync(gate, { recursive: true });
    const cfg = path.join(dir, 'e2e.yaml');
    fs.writeFileSync(
      cfg,
      [
        'name: m-e2e',
        'seed: 7',
        `servers: [{url: "${s1.url}"}, {url: "${s2.url}"}]`,
        `backends: ["${a.url}", "${b.url}"]`,
        `dataset: {path: "${dataset}"}`,
        'n: 4',
        'batch_size: 3',
        'steps: 3',
        `output_dir: ${path.join(dir, 'runs')}`,
        'health_interval_ms: 200',
        `trainer: {command: 'touch ${gate}/at-{step}; while [ ! -e ${gate}/go-{step} ]; do sleep 0.05; done'}`,
        '',
      ].join('\n'),
    );
    const child = spawn(process.execPath, [CLI, 'train', cfg], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (out += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const at = (k: number) =>
      until(() => fs.existsSync(path.join(gate, `at-${k}`)) || child.exitCode !== null, `step ${k}'s batch`, 60_000);
    const go = (k: number) => fs.writeFileSync(path.join(gate, `go-${k}`), '');
    try {
      await at(0);
      const inFlight2 = (await statusOf(s2.url)).pending_jobs;
      await s2.kill('SIGKILL');
      go(0);
      await at(1);
      await a.kill('SIGKILL');
      go(1);
      await until(async () => (await backendOn(s1.url, a.url))?.healthy === false, 'killed backend unhealthy on the survivor', 20_000);
      const a2 = await sim(Number(new URL(a.url).port));
      await until(async () => (await backendOn(s1.url, a.url))?.healthy === true, 'restarted backend healthy', 20_000);
      await at(2);
      go(2);
      const code = await exited;
      expect(code, out.slice(-3000)).toBe(0);
      const runDir = path.join(dir, 'runs', 'm-e2e');
      const batches = fs
        .readFileSync(path.join(runDir, 'batches.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Batch);
      const { rollouts } = checkBatches(batches, 3, 3, 4);
      const summary = JSON.parse(fs.readFileSync(path.join(runDir, 'summary.json'), 'utf8'));
      expect(summary.totals.dropped_error).toBe(0);
      expect(summary.policy_version).toBe(2);
      // The process table: the coordinator and its trainer commands are gone; only the servers and
      // backends this test started still run (the afterEach kills them; afterAll checks nothing stays).
      expect(alive(child.pid!)).toBe(false);
      expect(processTable().filter((p) => p.cmd.includes(gate) || (p.cmd.includes(CLI) && p.cmd.includes(cfg)))).toEqual([]);
      const ours = new Set(children.filter((x) => x.child.exitCode === null && x.child.signalCode === null).map((x) => x.pid));
      expect(descendantsOf(process.pid).filter((p) => p.cmd.includes(CLI) && !ours.has(p.pid))).toEqual([]);
      expect([...ours].sort()).toEqual([s1.pid, b.pid, a2.pid].sort());
      observe({
        section: 'faults',
        name: 'raas train, 3 steps against two raas serve and two raas sim-llm: a server SIGKILLed after step 0, a backend SIGKILLed and restarted during step 1',
        observed: `exit 0; 3/3 steps of 3 groups in batches.jsonl (${rollouts} rollouts, 0 failed, 0 dropped groups, policy_version 2); ${inFlight2} jobs were pending on the killed server; the restarted backend's breaker closed again; afterwards no raas train, trainer command or unexpected raas process in the process table`,
        figures: { jobs: summary.totals.jobs_submitted, lost_jobs: 0, orphans: 0 },
      });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      for (let k = 0; k < 3; k++) go(k); // release any trainer command still waiting
    }
  }, 120_000);
});
