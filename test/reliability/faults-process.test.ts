// Faults of whole processes: `raas serve` SIGTERMed under load (every waiter answered, exit 0, no
// orphan), `raas serve` SIGKILLed (its sandboxes die with it, the fleet resubmits to the other
// server, its journal keeps finished results across the restart), and a coordinator restart with
// resume (no finished rollout lost, no job run twice).
import fs from 'node:fs';
import { rootTag } from '../../src/server/sandbox/runtimes/bwrap.js';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutFleet } from '../../src/client/fleet.js';
import { Coordinator } from '../../src/dapo/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { observe } from './helpers/observe.js';
import {
  descendantsOf,
  inNamespaces,
  isToolServer,
  pidNs,
  processTable,
  waitGone,
  withCommand,
  workspaceCount,
  type Proc,
} from '../helpers/procs.js';
import {
  HANDLERS,
  inProcessServer,
  postJson,
  request,
  sandboxRoot,
  serveProcess,
  tempDir,
  until,
  type ServeProcess,
} from './helpers/servers.js';

const chat = (id: string, turns = 3) => ({
  job_id: id,
  instance: { data_source: 'chat', turns },
  sampling_params: { seed: 1, max_tokens_per_turn: 40 },
});
const sbx = (id: string, commands: string[]) => ({ job_id: id, instance: { data_source: 'rel-sandbox', commands } });

/** A YAML server config with a sandbox root and a journal directory. */
function serverConfig(dir: string, root: string, journal?: string): string {
  const file = path.join(dir, `server-${path.basename(root)}.yaml`);
  fs.writeFileSync(
    file,
    `sandbox:\n  runtime: bwrap\n  root: ${root}\n  close_grace_ms: 200\nshutdown_grace_s: 15\n${journal ? `journal:\n  dir: ${journal}\n` : ''}`,
  );
  return file;
}

const started: ServeProcess[] = [];
afterAll(async () => {
  for (const s of started) await s.kill('SIGKILL');
});

describe('faults: rollout server processes terminated and killed', () => {
  let sim: SimHandle;
  const dir = tempDir('proc');

  beforeAll(async () => {
    // ~40 tokens at 25 ms: each chat turn lasts about a second, so SIGTERM lands mid-RUN.
    sim = await startSim({
      seed: 8,
      latency: { decode_ms_per_token: 25 },
      filler: { median_tokens: 40, sigma: 0, min_tokens: 40, max_tokens: 40 },
    });
  });
  afterAll(async () => {
    await sim?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('SIGTERM under load: every held /process is answered, exit 0, no process or workspace left', async () => {
    const root = sandboxRoot('term');
    const srv = await serveProcess(['--config', serverConfig(dir, root), '--llm', sim.url, '--handler', HANDLERS, '--log-level', 'warn']);
    started.push(srv);
    const pending = [
      ...Array.from({ length: 40 }, (_, i) =>
        postJson(`${srv.url}/process`, chat(`term-chat-${i}`), { timeoutMs: 60_000 }).catch((e: Error) => e),
      ),
      ...Array.from({ length: 3 }, (_, i) =>
        postJson(`${srv.url}/process`, sbx(`term-sbx-${i}`, ['sleep 30', 'echo SANDBOX-OK']), { timeoutMs: 60_000 }).catch((e: Error) => e),
      ),
    ];
    await until(() => descendantsOf(srv.pid).filter(isToolServer).length === 3, 'three sandboxes running', 60_000);
    await until(
      async () => (await Promise.all([0, 1, 2].map((i) => request(`${srv.url}/jobs/term-sbx-${i}`)))).every((j) => j.body?.state === 'run'),
      'sandboxed jobs in RUN',
      60_000,
    );
    const tree = descendantsOf(srv.pid);
    const namespaces = tree.map((p) => pidNs(p.pid)).filter((n): n is string => !!n && n !== pidNs(srv.pid));
    const t0 = performance.now();
    srv.child.kill('SIGTERM');
    const answers = await Promise.all(pending);
    const exit = await srv.exited;
    const seconds = (performance.now() - t0) / 1000;
    const errors = answers.filter((a) => a instanceof Error) as Error[];
    const byCritical = new Map<string, number>();
    for (const a of answers)
      if (!(a instanceof Error)) byCritical.set(String(a.body?.critical_error), (byCritical.get(String(a.body?.critical_error)) ?? 0) + 1);
    const left = await waitGone(() => [
      ...inNamespaces(namespaces),
      ...tree.filter((p) => processTable().some((q) => q.pid === p.pid && q.cmd === p.cmd)),
    ]);
    observe({
      section: 'faults',
      name: 'rollout server SIGTERMed under load (40 chat + 3 sandboxed jobs in flight)',
      observed: `exit code ${exit.code} after ${seconds.toFixed(1)} s; ${answers.length - errors.length}/${answers.length} held /process answered 200 (critical_error: ${JSON.stringify(Object.fromEntries(byCritical))})${errors.length ? `; ${errors.length} connection errors: ${errors[0].message}` : ''}; ${tree.length} child processes before, ${left.length} left; workspaces left ${workspaceCount(root)}`,
      figures: { jobs: answers.length, lost_jobs: errors.length, orphans: left.length },
    });
    expect(errors.map((e) => e.message)).toEqual([]);
    for (const a of answers) expect((a as { status: number }).status).toBe(200);
    expect(exit.code).toBe(0);
    expect(left).toEqual([]);
    expect(workspaceCount(root)).toBe(0);
    fs.rmSync(root, { recursive: true, force: true });
  }, 180_000);

  it('SIGKILL: its sandboxes die with it, the fleet resubmits elsewhere, its journal keeps finished results', async () => {
    const rootA = sandboxRoot('killA');
    const rootB = sandboxRoot('killB');
    const journalA = path.join(dir, 'journal-a');
    const cfgA = serverConfig(dir, rootA, journalA);
    // Each child is registered for cleanup the moment it exists, so a failed start of the next one leaks nothing.
    const a = await serveProcess(['--config', cfgA, '--llm', sim.url, '--handler', HANDLERS]);
    started.push(a);
    const b = await serveProcess([
      '--config',
      serverConfig(dir, rootB, path.join(dir, 'journal-b')),
      '--llm',
      sim.url,
      '--handler',
      HANDLERS,
    ]);
    started.push(b);
    // Finished on A before the crash: these must survive in A's journal.
    const early = await Promise.all([0, 1, 2].map((i) => postJson(`${a.url}/process`, chat(`early-${i}`, 1), { timeoutMs: 30_000 })));
    expect(early.map((e) => e.body.critical_error)).toEqual([null, null, null]);
    await new Promise((r) => setTimeout(r, 300)); // the journal append is buffered: give it its write

    const fleet = new RolloutFleet({
      servers: [{ url: a.url }, { url: b.url }],
      health_interval_ms: 500,
      unhealthy_after: 2,
      client: { retries: 0 },
    });
    try {
      const groups = [0, 1, 2, 3].map((g) => fleet.submitGroup([0, 1].map((k) => sbx(`kill-g${g}-r${k}`, ['sleep 3', 'echo SANDBOX-OK']))));
      await until(() => descendantsOf(a.pid).filter(isToolServer).length >= 2, 'sandboxes running on A', 60_000);
      const tree = descendantsOf(a.pid);
      const namespaces = [...new Set(tree.map((p) => pidNs(p.pid)).filter((n): n is string => !!n && n !== pidNs(a.pid)))];
      const onA = tree.filter(isToolServer).length;
      await a.kill('SIGKILL');
      // Its sandboxes die with it (--die-with-parent): nothing of A's tree stays.
      const left = await waitGone(
        () => [...inNamespaces(namespaces), ...tree.filter((p) => processTable().some((q) => q.pid === p.pid && q.cmd === p.cmd))],
        5000,
      );
      expect(left).toEqual([]);
      const results = await Promise.all(groups.flat());
      expect(results.map((r) => r.critical_error)).toEqual(Array(8).fill(null));
      expect(results.every((r) => r.reward === 1)).toBe(true);
      const stats = fleet.stats();
      expect(stats.failed_over).toBeGreaterThan(0);
      const staleWorkspaces = workspaceCount(rootA);

      // Restart A on the same journal: finished results answer again; jobs in flight at the crash are 404.
      const a2 = await serveProcess(['--config', cfgA, '--llm', sim.url, '--handler', HANDLERS]);
      started.push(a2);
      const kept = await Promise.all([0, 1, 2].map((i) => request(`${a2.url}/jobs/early-${i}`)));
      expect(kept.map((k) => k.body.state)).toEqual(['done', 'done', 'done']);
      expect(kept.map((k) => k.body.result.tokens)).toEqual(early.map((e) => e.body.tokens));
      const crashed = await request(`${a2.url}/jobs/kill-g0-r0`);
      // The restarted server's first sandbox sweeps the workspaces its dead predecessor left (D3).
      const sweep = await postJson(`${a2.url}/process`, sbx('after-restart', ['echo SANDBOX-OK']), { timeoutMs: 60_000 });
      expect(sweep.body.critical_error).toBe(null);
      await until(() => workspaceCount(rootA) === 0, 'stale workspaces swept', 10_000).catch(() => undefined);
      const afterSweep = workspaceCount(rootA);
      observe({
        section: 'faults',
        name: 'rollout server SIGKILLed with sandboxes running',
        observed: `${onA} sandboxes on the killed server; ${tree.length} processes of its tree gone within 5 s (left: ${left.length}); the fleet failed over ${stats.failed_over} job(s): 8/8 sandboxed jobs finished on the other server; after a restart on the same journal 3/3 results finished before the crash answered GET /jobs/:id (a job in flight at the crash: ${crashed.status} ${crashed.body?.error?.code ?? crashed.body?.state}); ${staleWorkspaces} workspace dir(s) of killed sandboxes left on disk under sandbox.root, ${afterSweep} after the restarted server opened its first sandbox`,
        figures: { jobs: 12, lost_jobs: 0, orphans: left.length, stale_workspaces: afterSweep },
      });
      expect(afterSweep).toBe(0);
      await a2.kill('SIGTERM');
    } finally {
      await fleet.close();
      await b.kill('SIGTERM');
      for (const r of [rootA, rootB]) fs.rmSync(r, { recursive: true, force: true });
    }
    // A bwrap names its root by a tag on its argv, the tool servers and helpers by the root's path.
    const ours = (): Proc[] => [rootA, rootB].flatMap((r) => [...withCommand(r), ...withCommand(rootTag(r))]);
    expect(await waitGone(ours)).toEqual([]);
  }, 240_000);
});

describe('faults: coordinator restart with resume', () => {
  it('re-attaches to in-flight jobs by id: no finished rollout lost, no job run twice', async () => {
    const sim = await startSim({ seed: 4, latency: { decode_ms_per_token: 4 }, abort_on_weight_update: false });
    const journal = tempDir('coord-journal');
    const server = await inProcessServer({ llm: { backends: [{ address: sim.url }] }, journal: { dir: journal }, workers: { run: 16 } });
    const data = path.join(journal, 'chat.jsonl');
    fs.writeFileSync(
      data,
      Array.from({ length: 40 }, (_, i) =>
        JSON.stringify({ data_source: 'chat', instance_id: `c${i}`, turns: 1 + (i % 2), pass_rate: [0.5, 0.3, 0.7][i % 3] }),
      ).join('\n') + '\n',
    );
    const cfg = { name: 'rel-resume', seed: 9, servers: [{ url: server.url }], dataset: { path: data }, n: 4, batch_size: 2, steps: 3 };
    try {
      const first = new Coordinator(cfg);
      const b0 = await first.nextBatch({ timeout_s: 60 });
      const state = JSON.parse(JSON.stringify(first.checkpoint()));
      const inFlight: string[] = state.groups.flatMap((g: { in_flight: string[] }) => g.in_flight);
      await first.close({ cancel: false }); // the trainer crashes; its jobs keep running on the server
      const second = Coordinator.resume(cfg, state);
      const b1 = await second.nextBatch({ timeout_s: 60 });
      const b2 = await second.nextBatch({ timeout_s: 60 });
      await second.close();
      const groups = [b0, b1, b2].flatMap((b) => b.groups.map((g) => g.group_id));
      expect(new Set(groups).size).toBe(groups.length);
      expect([b0.step, b1.step, b2.step]).toEqual([0, 1, 2]);
      // Every job ran once: the journal holds exactly one line per job id.
      await server.close();
      const ids = fs
        .readFileSync(path.join(journal, 'results.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l).job_id as string);
      const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
      expect(twice).toEqual([]);
      // Every rollout in flight at the checkpoint reached a terminal result on the server.
      const ended = new Set(ids);
      const lost = inFlight.filter((id) => !ended.has(id));
      expect(lost).toEqual([]);
      observe({
        section: 'faults',
        name: 'coordinator restart with resume (checkpoint, close without cancel, Coordinator.resume)',
        observed: `${inFlight.length} jobs in flight at the checkpoint; after resume steps ${[b0.step, b1.step, b2.step].join(', ')} handed over ${groups.length} distinct groups; ${ids.length} job results on the server, none twice; in-flight jobs without a result: ${lost.length}`,
        figures: { jobs: ids.length, lost_jobs: lost.length, duplicate_results: twice.length },
      });
    } finally {
      await server.close();
      await sim.close();
      fs.rmSync(journal, { recursive: true, force: true });
    }
  }, 90_000);
});
