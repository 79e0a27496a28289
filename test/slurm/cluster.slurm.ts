import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { withEnv } from '../helpers/procs.js';
import {
  JOIN_TEMPLATE,
  ROOT,
  cancel,
  clusterNodes,
  hostOf,
  jobState,
  jsonLines,
  nodeState,
  processes,
  queued,
  setNodeState,
  signalBatch,
  sleep,
  submit,
  waitFile,
  waitJob,
  type JournalLine,
  type PlacementRecord,
} from './slurm.js';

/**
 * configs/slurm/raas.sbatch — the project's template, not a copy — submitted with real sbatch to a
 * real local Slurm cluster (slurmctld, one slurmd per node, munged: scripts/slurm-cluster.sh), with
 * the simulated inference server as the launcher. Every node runs `raas serve` and `raas sim-llm`
 * bound to its own loopback address; the coordinator runs on the first node. The assertions read
 * the run's own records: placement.json, placement-plan.json, the servers' journals, the batches.
 */
describe('raas.sbatch on a local multi-node Slurm cluster', () => {
  const nodes = clusterNodes();
  const N = nodes.length;
  const dirs: string[] = [];
  const jobs: string[] = [];
  // A known token, so the test can look for it in every process's command line.
  const TOKEN = `slurmtest${randomBytes(12).toString('hex')}`;
  const env = { RAAS_HOME: ROOT, LAUNCHER: 'sim', SERVE_ARGS: '--workers-init 4 --workers-run 4 --workers-eval 4', RAAS_TOKEN: TOKEN };
  // The template asks for GPUs and 64 CPUs per task; the local nodes have neither.
  const sbatchArgs = [`--nodes=${N}`, '--gpus-per-node=0', '--cpus-per-task=1'];

  const start = (trainArgs: string): { dir: string; id: string; runDir: string; journal: string } => {
    const dir = mkdtempSync(path.join(tmpdir(), 'raas-slurm-test-'));
    dirs.push(dir);
    const journal = path.join(dir, 'journal');
    // Submitted from a scratch directory: the template's default outputs (runs/slurm-<jobid>/) land there.
    const id = submit(dir, { ...env, TRAIN_ARGS: trainArgs, JOURNAL_DIR: journal }, sbatchArgs);
    jobs.push(id);
    return { dir, id, runDir: path.join(dir, 'runs', `slurm-${id}`), journal };
  };
  const jobLog = (dir: string, id: string): string => {
    const tail = (f: string): string => {
      try {
        return readFileSync(f, 'utf8').split('\n').slice(-40).join('\n');
      } catch {
        return `(no ${f})`;
      }
    };
    const runDir = path.join(dir, 'runs', `slurm-${id}`);
    let files = '';
    try {
      files = readdirSync(runDir).join(' ');
    } catch (err) {
      files = String(err);
    }
    return `--- raas-${id}.out ---\n${tail(path.join(dir, `raas-${id}.out`))}\n--- ${runDir}: ${files}`;
  };
  const json = <T>(f: string): T => JSON.parse(readFileSync(f, 'utf8')) as T;
  /** Runs the checks of a finished job; a failure carries the job's output, to see why. */
  const checks = async (dir: string, id: string, body: () => void | Promise<void>): Promise<void> => {
    try {
      await body();
    } catch (err) {
      if (err instanceof Error) err.message += `\n${jobLog(dir, id)}`;
      throw err;
    }
  };
  const journalOf = (journal: string, node: string): JournalLine[] => jsonLines<JournalLine>(path.join(journal, node, 'results.jsonl'));
  const rolloutIds = (runDir: string): string[] =>
    jsonLines<{ groups: Array<{ rollouts: Array<{ job_id: string }> }> }>(path.join(runDir, 'batches.jsonl')).flatMap((b) =>
      b.groups.flatMap((g) => g.rollouts.map((r) => r.job_id)),
    );

  beforeAll(() => {
    expect(N, 'the local cluster has at least 2 nodes (scripts/slurm-cluster.sh up)').toBeGreaterThanOrEqual(2);
    for (const n of nodes) expect(n.address, `${n.node} resolves to its own loopback address`).toMatch(/^127\./);
    expect(new Set(nodes.map((n) => n.address)).size).toBe(N);
  });

  // Each scenario starts from an idle cluster: a failed test's job is cancelled, and the servers of
  // a finished job (still closing after the batch script ended) are gone before the next job binds
  // the same ports.
  afterEach(async () => {
    for (const id of jobs) if (!['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'PURGED'].includes(jobState(id).state)) cancel(id);
    for (let i = 0; i < 120; i++) {
      if (queued().filter((j) => jobs.includes(j)).length === 0 && nodes.every((n) => processes(`--host ${n.address} `).length === 0))
        return;
      await sleep(250);
    }
  });

  afterAll(async () => {
    for (const id of jobs) if (!['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'PURGED'].includes(jobState(id).state)) cancel(id);
    // Nothing of the jobs may outlive them: no job in squeue, no raas process on a node address.
    let left: string[] = [];
    let procs: Array<{ pid: number; cmd: string }> = [];
    for (let i = 0; i < 60; i++) {
      left = queued().filter((j) => jobs.includes(j));
      procs = nodes.flatMap((n) => processes(`--host ${n.address} `));
      if (left.length === 0 && procs.length === 0) break;
      await sleep(500);
    }
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    expect(left, 'jobs left in squeue').toEqual([]);
    expect(
      procs.map((p) => p.cmd),
      'raas processes left on the nodes',
    ).toEqual([]);
  });

  it(`runs the whole template on ${N} nodes: every inference server placed on the rollout server of its own node, and the rollouts ran there`, async () => {
    const { dir, id, runDir, journal } = start('--smoke');
    await waitFile(path.join(runDir, 'batches', 'step-0.json'), id, 300);
    // While every server and the coordinator run: the token is on no process's command line (any
    // user of a shared node can read those through ps), nor in the coordinator's generated config.
    const servers = processes('cli.js serve', '--token-env RAAS_TOKEN');
    const withToken = processes(TOKEN);
    const generated = readdirSync(path.join(ROOT, 'configs/slurm')).filter((f) => f.startsWith('.train-') && f.endsWith(`-${id}.yaml`));
    const configText = generated.map((f) => readFileSync(path.join(ROOT, 'configs/slurm', f), 'utf8')).join('\n');
    const state = await waitJob(id, 480);
    await checks(dir, id, () => {
      expect(servers, 'one raas serve per node, each given --token-env RAAS_TOKEN').toHaveLength(N);
      expect(
        withToken.map((p) => p.cmd),
        'processes whose command line holds the token',
      ).toEqual([]);
      expect(generated, "the coordinator's generated config").toHaveLength(1);
      expect(configText).toContain('token_env: RAAS_TOKEN');
      expect(configText).not.toContain(TOKEN);
      expect(state).toEqual({ state: 'COMPLETED', exit: '0:0' });
      const summary = json<{ steps: Array<{ step: number; groups: number }> }>(path.join(runDir, 'summary.json'));
      expect(summary.steps.map((s) => [s.step, s.groups])).toEqual([
        [0, 4],
        [1, 4],
        [2, 4],
      ]);

      for (const n of nodes) {
        // Each node's servers bound that node's own address (resolved from $SLURMD_NODENAME), same ports.
        expect(readFileSync(path.join(runDir, `serve-${n.node}.log`), 'utf8')).toContain(
          `raas serve listening on http://${n.address}:8006`,
        );
        expect(readFileSync(path.join(runDir, `llm-0-${n.node}.log`), 'utf8')).toContain(
          `raas sim-llm listening on http://${n.address}:8000`,
        );
      }

      // The plan: every inference server in phase 1 (same node) on its node's rollout server.
      const plan = json<{
        plan: { assignments: Array<{ rollout_server: string; llm_servers: Array<{ address: string; phase: number }> }> };
      }>(path.join(runDir, 'placement-plan.json')).plan;
      expect(plan.assignments.map((a) => [hostOf(a.rollout_server), a.llm_servers.map((l) => [hostOf(l.address), l.phase])])).toEqual(
        nodes.map((n) => [n.address, [[n.address, 1]]]),
      );

      // What the servers held at the end: exactly their own node's inference server, at the last
      // weight version (steps 0-2: updates after steps 0 and 1), and every one of them was used.
      const placed = json<PlacementRecord>(path.join(runDir, 'placement.json'));
      expect(placed.job_id).toBe(id);
      expect(placed.nodes.map((n) => [n.node, n.reachable, n.backends.map((b) => [b.node, b.address, b.weight_version])])).toEqual(
        nodes.map((n) => [n.node, true, [[n.node, `http://${n.address}:8000`, '2']]]),
      );
      for (const n of placed.nodes) expect(n.backends[0].assigned, `${n.node}'s backend got jobs`).toBeGreaterThan(0);

      // The journals: every rollout a node's server ran used that node's inference server; every
      // rollout of the batches is among them; every node ran rollouts.
      const ranOn = new Map<string, string>();
      for (const n of nodes) {
        const lines = journalOf(journal, n.node);
        const done = lines.filter((l) => l.state === 'done');
        expect(done.length, `${n.node} ran rollouts`).toBeGreaterThan(0);
        for (const l of lines) if (l.result.backend !== null) expect(hostOf(l.result.backend), `${l.job_id} on ${n.node}`).toBe(n.address);
        for (const l of done) ranOn.set(l.job_id, n.node);
      }
      const ids = rolloutIds(runDir);
      expect(ids.length).toBe(3 * 4 * 4);
      expect(
        ids.filter((j) => !ranOn.has(j)),
        'batch rollouts not found in any node journal',
      ).toEqual([]);
    });
  });

  it(`a node's rollout server killed after the first step: the run finishes all its steps on the other ${N - 1} node(s)`, async () => {
    const victim = nodes[N - 1];
    const survivors = nodes.slice(0, -1);
    const { dir, id, runDir, journal } = start('--smoke --steps 5');
    await waitFile(path.join(runDir, 'batches', 'step-0.json'), id, 300);
    // This job's server only: the previous test's job may still be shutting down on the same node.
    const ofJob = new Set(withEnv('SLURM_JOB_ID', id).map((p) => p.pid));
    const serve = processes('cli.js serve', `--host ${victim.address} `).filter((p) => ofJob.has(p.pid));
    expect(
      serve.map((p) => p.cmd),
      `exactly one raas serve on ${victim.node}`,
    ).toHaveLength(1);
    process.kill(serve[0].pid, 'SIGKILL');
    const killedAt = Date.now();

    const state = await waitJob(id, 480);
    await checks(dir, id, () => {
      expect(state).toEqual({ state: 'COMPLETED', exit: '0:0' });
      const summary = json<{ steps: Array<{ step: number; groups: number }> }>(path.join(runDir, 'summary.json'));
      expect(summary.steps.map((s) => [s.step, s.groups])).toEqual([0, 1, 2, 3, 4].map((s) => [s, 4]));

      // The weight updates after the failure placed over the live servers only: each survivor keeps
      // its own node's inference server, the dead node's one (still answering) moved to a survivor,
      // all at the final weight version 4 (registered after the kill).
      const placed = json<PlacementRecord>(path.join(runDir, 'placement.json'));
      const byNode = new Map(placed.nodes.map((n) => [n.node, n]));
      expect(byNode.get(victim.node)?.reachable).toBe(false);
      for (const s of survivors) {
        const rec = byNode.get(s.node)!;
        expect(rec.reachable).toBe(true);
        expect(
          rec.backends.map((b) => b.node),
          `${s.node} keeps its own inference server`,
        ).toContain(s.node);
        for (const b of rec.backends) expect(b.weight_version).toBe('4');
      }
      const held = survivors.flatMap((s) => byNode.get(s.node)!.backends.map((b) => b.node)).sort();
      expect(held, 'every inference server is placed on a live rollout server').toEqual(nodes.map((n) => n.node).sort());

      // Rollouts ran on the survivors after the kill; none ended on the dead server after it; every
      // rollout of the batches is in some node's journal.
      const after = survivors.flatMap((s) => journalOf(journal, s.node)).filter((l) => l.state === 'done' && l.ended_at > killedAt);
      expect(after.length, 'rollouts finished on the survivors after the kill').toBeGreaterThan(0);
      const victimLines = journalOf(journal, victim.node);
      expect(victimLines.filter((l) => l.ended_at > killedAt + 1000)).toEqual([]);
      const done = new Set(
        nodes
          .flatMap((n) => journalOf(journal, n.node))
          .filter((l) => l.state === 'done')
          .map((l) => l.job_id),
      );
      const ids = rolloutIds(runDir);
      expect(ids.length).toBe(5 * 4 * 4);
      expect(
        ids.filter((j) => !done.has(j)),
        'batch rollouts not found in any node journal',
      ).toEqual([]);
    });
  });

  // What each side does when Slurm itself takes a node away mid-run (docs/slurm.md): DOWN ends the
  // job's steps on that node (the template's --no-kill keeps the allocation alive), and the
  // coordinator routes around the dead server as it does for a crash; DRAIN only stops new
  // allocations there, so the node's servers keep serving the running job to its end.
  for (const how of ['down', 'drain'] as const) {
    it(`a node set ${how.toUpperCase()} with scontrol after the first step: the run finishes all its steps`, async () => {
      const victim = nodes[N - 1];
      const { dir, id, runDir, journal } = start('--smoke --steps 5');
      await waitFile(path.join(runDir, 'batches', 'step-0.json'), id, 300);
      const at = Date.now();
      setNodeState(victim.node, how);
      let stateOfNode = '';
      let serveGone = false;
      let state: { state: string; exit: string };
      try {
        // Slurm's part: DOWN kills the job's steps on that node (its raas serve ends; the node may come
        // back to idle at once under ReturnToService=2, since its slurmd still answers); DRAIN leaves
        // them running and only marks the node.
        for (let i = 0; i < 120; i++) {
          stateOfNode = nodeState(victim.node);
          serveGone = processes('cli.js serve', `--host ${victim.address} `).length === 0;
          if (how === 'down' ? serveGone : /drain/.test(stateOfNode)) break;
          await sleep(250);
        }
        state = await waitJob(id, 480);
      } finally {
        if (/down|drain/.test(nodeState(victim.node))) setNodeState(victim.node, 'resume');
      }
      await checks(dir, id, () => {
        if (how === 'down') expect(serveGone, `Slurm ended the job's raas serve step on ${victim.node}`).toBe(true);
        else expect(stateOfNode).toMatch(/drain/);
        expect(state).toEqual({ state: 'COMPLETED', exit: '0:0' });
        const summary = json<{ steps: Array<{ step: number; groups: number }> }>(path.join(runDir, 'summary.json'));
        expect(summary.steps.map((s) => [s.step, s.groups])).toEqual([0, 1, 2, 3, 4].map((s) => [s, 4]));
        const done = new Set(
          nodes
            .flatMap((n) => journalOf(journal, n.node))
            .filter((l) => l.state === 'done')
            .map((l) => l.job_id),
        );
        const ids = rolloutIds(runDir);
        expect(ids.length).toBe(5 * 4 * 4);
        expect(
          ids.filter((j) => !done.has(j)),
          'batch rollouts not found in any node journal',
        ).toEqual([]);
        const placed = json<PlacementRecord>(path.join(runDir, 'placement.json'));
        const victimRec = placed.nodes.find((n) => n.node === victim.node)!;
        const laterOnVictim = journalOf(journal, victim.node).filter((l) => l.state === 'done' && l.ended_at > at + 2000);
        if (how === 'down') {
          // Its rollout server was killed with its step: unreachable at the end, no rollout ended there later.
          expect(victimRec.reachable).toBe(false);
          expect(laterOnVictim).toEqual([]);
        } else {
          // Draining does not touch running steps: the node kept running rollouts to the end.
          expect(victimRec.reachable).toBe(true);
          expect(laterOnVictim.length, `rollouts finished on the drained ${victim.node}`).toBeGreaterThan(0);
        }
      });
    });
  }

  // Elastic membership under Slurm: a training started with REGISTRY=1 on the first node, and a
  // second job (configs/slurm/raas-join.sbatch) whose node joins it mid-run, gets its own node's
  // inference server placed onto its rollout server and runs rollouts there; the second job is then
  // told to leave (TERM to its batch script: a drain), and the training finishes every step.
  it("a second job's node joins the running training through the registry, is used, and drains away without losing a rollout", async () => {
    const [home, guest] = [nodes[0]!, nodes[1]!];
    const dir = mkdtempSync(path.join(tmpdir(), 'raas-slurm-join-'));
    dirs.push(dir);
    const journal = path.join(dir, 'journal');
    const id = submit(dir, { ...env, REGISTRY: '1', TRAIN_ARGS: '--smoke --steps 12', JOURNAL_DIR: journal }, [
      '--nodes=1',
      `--nodelist=${home.node}`,
      '--gpus-per-node=0',
      '--cpus-per-task=1',
    ]);
    jobs.push(id);
    const runDir = path.join(dir, 'runs', `slurm-${id}`);
    await waitFile(path.join(runDir, 'batches', 'step-0.json'), id, 300);
    const registry = readFileSync(path.join(runDir, 'registry.url'), 'utf8').trim();
    expect(registry).toBe(`http://${home.address}:8006`);

    const joinDir = path.join(dir, 'join');
    const joinId = submit(
      dir,
      { ...env, JOIN: registry, JOURNAL_DIR: journal, RUN_DIR: joinDir },
      ['--nodes=1', `--nodelist=${guest.node}`, '--gpus-per-node=0', '--cpus-per-task=1'],
      [],
      JOIN_TEMPLATE,
    );
    jobs.push(joinId);
    // The guest node's server ran rollouts, on its own node's inference server (placed there by the training).
    let guestDone: JournalLine[] = [];
    for (let i = 0; i < 600 && guestDone.length < 4; i++) {
      guestDone = journalOf(journal, guest.node).filter((l) => l.state === 'done');
      if (['COMPLETED', 'FAILED', 'CANCELLED'].includes(jobState(id).state)) break;
      await sleep(250);
    }
    await checks(dir, id, () => {
      expect(guestDone.length, `rollouts done on ${guest.node}, which joined mid-run`).toBeGreaterThanOrEqual(4);
      for (const l of guestDone) expect(hostOf(l.result.backend!), `${l.job_id} on ${guest.node}`).toBe(guest.address);
    });
    const nodesListed = (await (await fetch(`${registry}/nodes`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Array<{
      node_id: string;
      healthy: boolean;
    }>;
    expect(nodesListed.map((n) => `${n.node_id}:${n.healthy}`).sort()).toEqual([`${home.node}:true`, `${guest.node}:true`].sort());

    // Leave: TERM to the join job's batch script drains its server, which finishes what it holds and leaves.
    const leftAt = Date.now();
    signalBatch(joinId);
    const joinState = await waitJob(joinId, 300);
    const state = await waitJob(id, 480);
    await checks(dir, id, () => {
      expect(joinState).toEqual({ state: 'COMPLETED', exit: '0:0' });
      expect(readFileSync(path.join(joinDir, `serve-${guest.node}.log`), 'utf8')).toMatch(
        /drained \(\d+ jobs finished, 0 cancelled\); leaving/,
      );
      expect(state).toEqual({ state: 'COMPLETED', exit: '0:0' });
      const summary = json<{ steps: Array<{ step: number; groups: number }>; totals: { dropped_error: number } }>(
        path.join(runDir, 'summary.json'),
      );
      expect(summary.steps.map((s) => s.step)).toEqual([...Array(12).keys()]);
      expect(summary.totals.dropped_error).toBe(0);
      // Every rollout of the batches is in a journal, and each journal's rollouts used its own node's inference server.
      const done = new Map<string, string>();
      for (const n of [home, guest])
        for (const l of journalOf(journal, n.node)) {
          if (l.result.backend !== null) expect(hostOf(l.result.backend), `${l.job_id} on ${n.node}`).toBe(n.address);
          if (l.state === 'done') done.set(l.job_id, n.node);
        }
      const ids = rolloutIds(runDir);
      expect(ids.length).toBe(12 * 4 * 4);
      expect(
        ids.filter((j) => !done.has(j)),
        'batch rollouts not found in any node journal',
      ).toEqual([]);
      // After it left, nothing more ended on the guest.
      expect(journalOf(journal, guest.node).filter((l) => l.ended_at > leftAt + 60_000)).toEqual([]);
    });
  });
});
