import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, cliProcess, serveProcess, until, type ServeProcess } from '../reliability/helpers/servers.js';

const ADMIN = 'shared-fleet-admin-1';
const TOKEN_A = 'team-a-token-000001';
const TOKEN_B = 'team-b-token-000002';
const env = { RAAS_TEST_ADMIN: ADMIN, RAAS_TEST_TOKEN_A: TOKEN_A, RAAS_TEST_TOKEN_B: TOKEN_B };
const as = (token: string) => ({ authorization: `Bearer ${token}` });

/** The run sum of a stage's slot time per tenant, from a server's /metrics. */
async function stageSeconds(url: string, stage: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`, { headers: as(ADMIN) })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(new RegExp(`raas_tenant_stage_seconds_sum\\{stage="${stage}",tenant="([^"]+)"\\} ([0-9.e+-]+)`, 'g')))
    out[m[1]!] = Number(m[2]);
  return out;
}

/** Journal lines of a server: {job_id, tenant, result}. */
function journal(
  dir: string,
): Array<{ job_id: string; tenant?: string; state: string; result: { backend: string | null; data_source: string } }> {
  const f = path.join(dir, 'results.jsonl');
  if (!existsSync(f)) return [];
  return readFileSync(f, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** `raas train <config>` as a child process; resolves with its exit code and output. */
function train(config: string, cwd: string): { done: Promise<{ code: number | null; out: string }>; pid: number; output(): string } {
  const child = spawn(process.execPath, [CLI, 'train', config], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  child.stderr!.on('data', (c: Buffer) => (out += c));
  const done = new Promise<{ code: number | null; out: string }>((r) => child.on('close', (code) => r({ code, out })));
  return { done, pid: child.pid!, output: () => out };
}

/**
 * The shared fleet end to end: two `raas train` runs with different models (simulated vLLM
 * backends serving `team-a/…` and `team-b/…`), different n, batch size and tasks, and — on
 * purpose — the same run name, so their job ids collide, share rollout servers found through a
 * registry. Team a has weight 2, team b weight 1. A second server joins mid-run and the first
 * drains mid-run. Every process is a real `raas` process.
 */
describe('two trainers share one raas serve fleet', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-shared-fleet-'));
  const procs: ServeProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.kill('SIGTERM')));
    rmSync(dir, { recursive: true, force: true });
  });

  it('each gets its weighted share, neither sees or disturbs the other, a joining server is used and a draining one released without losing a job', async () => {
    const server = path.join(dir, 'tenants.yaml');
    writeFileSync(
      server,
      [
        'token_env: RAAS_TEST_ADMIN',
        'workers: {init: 4, run: 4, eval: 4}',
        'tenants:',
        '  - {name: team-a, token_env: RAAS_TEST_TOKEN_A, weight: 2}',
        '  - {name: team-b, token_env: RAAS_TEST_TOKEN_B, weight: 1}',
        '',
      ].join('\n'),
    );
    const sim = (name: string, model: string, extra = '') => {
      const f = path.join(dir, `${name}.yaml`);
      writeFileSync(f, `model: ${model}\nseed: 3\nlatency: {decode_ms_per_token: 3, overhead_ms: 5}\nrequest_log: 0\n${extra}`);
      return f;
    };
    // The registry is a raas serve with the same tenants (the trainers list its nodes with their own tokens).
    const [registry, simA, simB] = await Promise.all([
      serveProcess(['--config', server], env),
      cliProcess(['sim-llm', '--port', '0', '--config', sim('sim-a', 'team-a/Qwen3-8B', 'filler: {median_tokens: 32, sigma: 0.3}\n')]),
      cliProcess(['sim-llm', '--port', '0', '--config', sim('sim-b', 'team-b/Qwen3-1.7B', 'filler: {median_tokens: 24, sigma: 0.3}\n')]),
    ]);
    procs.push(registry, simA, simB);
    const join = (id: string) =>
      serveProcess(
        ['--config', server, '--join', registry.url, '--node-id', id, '--heartbeat-interval', '0.2', '--journal-dir', path.join(dir, id)],
        env,
      );
    const first = await join('s1');
    procs.push(first);

    const cfg = (team: 'a' | 'b', more: string[]) => {
      const f = path.join(dir, `train-${team}.yaml`);
      writeFileSync(
        f,
        [
          'name: shared',
          'seed: 5',
          `servers: {registry: ${registry.url}, token_env: RAAS_TEST_TOKEN_${team.toUpperCase()}, poll_interval_ms: 200}`,
          `backends: [${team === 'a' ? simA.url : simB.url}]`,
          `output_dir: ${path.join(dir, `runs-${team}`)}`,
          'health_interval_ms: 500',
          'sampling_params: {temperature: 1.0, max_tokens_per_turn: 256}',
          ...more,
          '',
        ].join('\n'),
      );
      return f;
    };
    // Different tasks: team a's prompts are single-turn chats, team b's two- and three-turn ones.
    const dataset = (team: string, turns: (i: number) => number) => {
      const f = path.join(dir, `chat-${team}.jsonl`);
      const rates = [0.5, 0.3, 0.7, 0.5, 0, 1];
      const rows = Array.from({ length: 300 }, (_, i) =>
        JSON.stringify({ data_source: 'chat', instance_id: `${team}${i}`, turns: turns(i), pass_rate: rates[i % rates.length] }),
      );
      writeFileSync(f, `${rows.join('\n')}\n`);
      return f;
    };
    const a = train(
      cfg('a', [`dataset: {path: ${dataset('a', () => 1)}}`, 'n: 4', 'batch_size: 4', 'steps: 10', 'max_inflight_jobs: 12']),
      dir,
    );
    const b = train(
      cfg('b', [`dataset: {path: ${dataset('b', (i) => 2 + (i % 2))}}`, 'n: 8', 'batch_size: 2', 'steps: 8', 'max_inflight_jobs: 16']),
      dir,
    );
    const stepFile = (team: string, k: number) => path.join(dir, `runs-${team}`, 'shared', 'batches', `step-${k}.json`);

    // Both trainers keep the one server busy: its RUN stage splits 2:1 by weight. Measured between
    // two of team a's steps, when both have been running a while (not the start-up of either).
    const step = (team: string, k: number) =>
      until(() => existsSync(stepFile(team, k)), `step ${k} of team ${team}`, 180_000).catch((err: Error) => {
        err.message += `\n--- team a ---\n${a.output().slice(-3000)}\n--- team b ---\n${b.output().slice(-3000)}`;
        throw err;
      });
    await step('a', 1);
    const s0 = await stageSeconds(first.url, 'run');
    await step('a', 3);
    const s1 = await stageSeconds(first.url, 'run');
    const dA = s1['team-a']! - s0['team-a']!;
    const dB = s1['team-b']! - s0['team-b']!;
    const shareA = dA / (dA + dB);

    // A second server joins: both trainers get backends placed onto it and send it work.
    const second = await join('s2');
    procs.push(second);
    const onSecond = async () => {
      const s = await stageSeconds(second.url, 'run');
      return (s['team-a'] ?? 0) > 0 && (s['team-b'] ?? 0) > 0;
    };
    await until(onSecond, 'both tenants running on the server that joined', 60_000);

    // Isolation, with colliding job ids: each tenant sees its own job under the same id, never the other's.
    const own = async (token: string) =>
      (await (await fetch(`${first.url}/jobs/shared-g0-r0`, { headers: as(token) })).json()) as {
        result?: { num_turns: number };
      };
    // Team b's prompts have 2 or 3 turns, team a's 1: the answer tells whose job it is.
    expect((await own(TOKEN_A)).result?.num_turns).toBe(1);
    expect((await own(TOKEN_B)).result?.num_turns).toBeGreaterThanOrEqual(2);

    // The first server drains: what it holds finishes there, new work goes to the second, and it leaves.
    const drain = await fetch(`${first.url}/drain`, { method: 'POST', headers: as(ADMIN) });
    expect(drain.status).toBe(200);
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(first.output()).toMatch(/drained \(\d+ jobs finished, 0 cancelled\); leaving/);
    const listed = (await (await fetch(`${registry.url}/nodes`, { headers: as(ADMIN) })).json()) as Array<{ node_id: string }>;
    expect(listed.map((n) => n.node_id)).toEqual(['s2']);

    const [ra, rb] = await Promise.all([a.done, b.done]);
    const errored = [...journal(path.join(dir, 's1')), ...journal(path.join(dir, 's2'))].filter(
      (l) => !['cancelled', null, undefined].includes((l.result as { critical_error?: string | null }).critical_error),
    );
    // No rollout failed on a server (cancelled ones are the coordinators' own early terminations).
    expect(errored.map((l) => l.result)).toEqual([]);
    expect(ra.code, ra.out.slice(-3000)).toBe(0);
    expect(rb.code, rb.out.slice(-3000)).toBe(0);
    for (const [team, steps] of [
      ['a', 10],
      ['b', 8],
    ] as const) {
      const summary = JSON.parse(readFileSync(path.join(dir, `runs-${team}`, 'shared', 'summary.json'), 'utf8'));
      expect(summary).toMatchObject({ status: 'finished', steps_done: steps });
      // No job lost: none ended in an error, no group was dropped for one.
      expect(summary.totals, JSON.stringify(summary.totals)).toMatchObject({ dropped_error: 0 });
    }

    // Weighted share on the shared server while both were backlogged: 2:1 (ideal 0.667).
    expect(shareA).toBeGreaterThan(0.58);
    expect(shareA).toBeLessThan(0.76);

    // Each tenant's jobs used only its own model's backend, on both servers; both servers ran both tenants.
    const lines = [...journal(path.join(dir, 's1')), ...journal(path.join(dir, 's2'))];
    const byTenant = (t: string) => lines.filter((l) => l.tenant === t && l.result.backend);
    expect(byTenant('team-a').length).toBeGreaterThan(20);
    expect(byTenant('team-b').length).toBeGreaterThan(20);
    expect(new Set(byTenant('team-a').map((l) => l.result.backend))).toEqual(new Set([simA.url]));
    expect(new Set(byTenant('team-b').map((l) => l.result.backend))).toEqual(new Set([simB.url]));
    for (const id of ['s1', 's2']) expect(new Set(journal(path.join(dir, id)).map((l) => l.tenant))).toEqual(new Set(['team-a', 'team-b']));
    expect(lines.every((l) => l.tenant === 'team-a' || l.tenant === 'team-b')).toBe(true);

    // An id only team a has: team b's lookups answer as for an unknown id, and the server counts them.
    const bIds = new Set(byTenant('team-b').map((l) => l.job_id));
    const aOnly = byTenant('team-a')
      .map((l) => l.job_id)
      .find((id) => !bIds.has(id) && journal(path.join(dir, 's2')).some((l) => l.job_id === id))!;
    expect(aOnly).toBeDefined();
    const get = await fetch(`${second.url}/jobs/${aOnly}`, { headers: as(TOKEN_B) });
    expect(get.status).toBe(404);
    const cancel = await fetch(`${second.url}/cancel`, {
      method: 'POST',
      headers: { ...as(TOKEN_B), 'content-type': 'application/json' },
      body: JSON.stringify({ job_id: aOnly }),
    });
    expect(await cancel.json()).toMatchObject({ cancelled: false, state: 'unknown' });
    expect((await fetch(`${second.url}/jobs/${aOnly}`, { headers: as(TOKEN_A) })).status).toBe(200);
    const metrics = await (await fetch(`${second.url}/metrics`, { headers: as(ADMIN) })).text();
    expect(metrics).toMatch(/raas_cross_tenant_lookups_total\{tenant="team-b"\} 2/);
    expect(readdirSync(path.join(dir, 'runs-a', 'shared', 'batches')).length).toBeGreaterThanOrEqual(10);
  }, 600_000);
});
