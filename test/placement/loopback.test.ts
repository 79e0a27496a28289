import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutClient } from '../../src/client/index.js';
import { applyPlacement, loadPlaceConfig, place, planPlacement } from '../../src/placement/index.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';

/**
 * Loopback "nodes": 127.0.0.2 and 127.0.0.3 each run one real rollout server and one simulated
 * LLM backend; a third backend lives on 127.0.0.4 where no rollout server runs.
 */
describe('placement on loopback nodes with real rollout servers and simulated backends', () => {
  const nodes = ['127.0.0.2', '127.0.0.3'];
  const servers: RolloutServer[] = [];
  const sims: SimHandle[] = [];
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'raas-place-'));
    for (const host of nodes) servers.push(await startRolloutServer({ host, port: 0, workers: { init: 2, run: 2, eval: 2 } }));
    for (const host of [...nodes, '127.0.0.4']) sims.push(await startSim({ host, port: 0 }));
  });
  afterAll(async () => {
    await Promise.all([...servers, ...sims].map((s) => s.close()));
    await rm(dir, { recursive: true, force: true });
  });

  const backendsOf = async (url: string): Promise<string[]> => {
    const c = new RolloutClient({ url });
    try {
      return (await c.status()).backends.map((b) => `${b.address}@${b.weight_version}`).sort();
    } finally {
      c.close();
    }
  };

  it('sends each backend to the rollout server of its node, the rest round-robin, and applies it', async () => {
    // Reverse the LLM order so that a plan ignoring nodes would come out different.
    const llm = [sims[2], sims[1], sims[0]].map((s) => ({ address: s.url }));
    const { plan, applied } = await place(
      servers.map((s) => ({ url: s.url })),
      llm,
      { weight_version: '7' },
    );
    expect(plan.assignments.map((a) => a.llm_servers.map((l) => [l.address, l.phase]))).toEqual([
      [
        [sims[0].url, 1],
        [sims[2].url, 2],
      ], // both servers hold one after phase 1: the tie goes to the first
      [[sims[1].url, 1]],
    ]);
    expect(applied.servers.map((s) => s.backends.length)).toEqual([2, 1]);
    expect(await backendsOf(servers[0].url)).toEqual([`${sims[0].url}@7`, `${sims[2].url}@7`].sort());
    expect(await backendsOf(servers[1].url)).toEqual([`${sims[1].url}@7`]);

    // The placed backends serve jobs: a chat job on node 2 runs against one of its backends.
    const c = new RolloutClient({ url: servers[0].url });
    try {
      const r = await c.process({ instance: { data_source: 'chat', instance_id: 'p', turns: 1, pass_rate: 1 }, job_id: 'place-job-1' });
      expect(r.critical_error).toBeNull();
      expect([sims[0].url, sims[2].url]).toContain(r.backend);
      expect(r.weight_versions).toEqual(['7']);
    } finally {
      c.close();
    }
  });

  it('re-applying replaces the previous assignment; sync mode never leaves a server empty', async () => {
    const plan = await planPlacement(
      servers.map((s) => ({ url: s.url })),
      [{ address: sims[1].url }],
    );
    await applyPlacement(plan, { weight_version: '8' }); // replace: clear then add
    expect(await backendsOf(servers[0].url)).toEqual([`${sims[1].url}@8`]); // phase 3: shared
    expect(await backendsOf(servers[1].url)).toEqual([`${sims[1].url}@8`]);
    const back = await planPlacement(
      servers.map((s) => ({ url: s.url })),
      sims.slice(0, 2).map((s) => ({ address: s.url })),
    );
    await applyPlacement(back, { weight_version: '9', mode: 'sync' });
    expect(await backendsOf(servers[0].url)).toEqual([`${sims[0].url}@9`]);
    expect(await backendsOf(servers[1].url)).toEqual([`${sims[1].url}@9`]);
  });

  it('raas place --config prints the plan and applies it (a real CLI process)', async () => {
    const cfg = path.join(dir, 'place.yaml');
    await writeFile(
      cfg,
      [
        'rollout_servers:',
        ...servers.map((s) => `  - url: ${s.url}`),
        'llm_servers:',
        ...sims.map((s) => `  - address: ${s.url}\n    api: vllm`),
        'weight_version: "11"',
      ].join('\n'),
    );
    const cli = path.resolve('dist/src/cli.js');
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [cli, 'place', '--config', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d: Buffer) => (stdout += d));
      p.stderr.on('data', (d: Buffer) => (stderr += d));
      p.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toContain(`placement: 3 LLM server(s) onto 2 rollout server(s)`);
    expect(stdout).toContain(`<- ${sims[0].url} (vllm)  phase 1: same node`);
    expect(stdout).toContain(`<- ${sims[2].url} (vllm)  phase 2: round-robin`);
    expect(stdout).toMatch(/applied: .* now has 2 backend\(s\)/);
    expect(await backendsOf(servers[0].url)).toContain(`${sims[0].url}@11`);
  }, 120_000); // starting a CLI process takes seconds on a loaded 2-core machine

  it('a broken config file fails with the key named', async () => {
    const cfg = path.join(dir, 'bad.yaml');
    await writeFile(cfg, 'rollout_servers: []\nllm_servers: [x]\n');
    await expect(loadPlaceConfig(cfg)).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/bad\.yaml: `rollout_servers`/),
    });
    await expect(loadPlaceConfig(path.join(dir, 'missing.yaml'))).rejects.toThrow(/cannot read it/);
  });
});
