/**
 * Soak: a longer run of the reliability suite's load and faults together. One `raas serve` child
 * process (journal on) with two `raas sim-llm` child processes as backends keeps `--concurrency`
 * chat jobs in flight (plus a share of sandboxed jobs as root); every `--fault-every` seconds one
 * backend is SIGKILLed and a fresh one registered in its place. It samples the server's RSS, and at
 * the end checks that every job got exactly one terminal result, the server holds no job, SIGTERM
 * exits 0, and nothing of the server's process tree is left.
 *
 *   npx tsx bench/soak.ts --minutes 10 [--concurrency 64] [--fault-every 20] [--sandbox-share 0.05] [--out bench/results/soak.json]
 */
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { descendantsOf, processTable } from '../test/helpers/procs.js';
import { HANDLERS, httpGet, httpPost, postJson, serveProcess, simProcess, type ServeProcess } from '../test/reliability/helpers/servers.js';

const { values: flags } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '64' },
    'fault-every': { type: 'string', default: '20' },
    'sandbox-share': { type: 'string', default: process.getuid?.() === 0 ? '0.05' : '0' },
    out: { type: 'string' },
  },
});
const MINUTES = Number(flags.minutes);
const CONCURRENCY = Number(flags.concurrency);
const FAULT_EVERY_S = Number(flags['fault-every']);
const SANDBOX_SHARE = Number(flags['sandbox-share']);

/** nodejs_heap_size_used_bytes of the server's /metrics, in MiB (NaN when it does not answer). */
async function heapUsedMb(url: string, agent: http.Agent): Promise<number> {
  try {
    const text = await new Promise<string>((resolve, reject) => {
      http
        .get(`${url}/metrics`, { agent }, (res) => {
          let b = '';
          res.on('data', (c: Buffer) => (b += c));
          res.on('end', () => resolve(b));
        })
        .on('error', reject);
    });
    const m = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(text);
    return m ? Number(m[1]) / 2 ** 20 : NaN;
  } catch {
    return NaN;
  }
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-soak-'));
  const root = process.getuid?.() === 0 ? `/var/tmp/raas-soak-${process.pid}` : path.join(dir, 'sandboxes');
  const simCfg = path.join(dir, 'sim.yaml');
  fs.writeFileSync(
    simCfg,
    'latency:\n  decode_ms_per_token: 2\n  overhead_ms: 2\nfiller:\n  median_tokens: 48\n  sigma: 0.8\n  max_tokens: 256\n',
  );
  fs.writeFileSync(
    path.join(dir, 'server.yaml'),
    `journal:\n  dir: ${path.join(dir, 'journal')}\nsandbox:\n  runtime: bwrap\n  root: ${root}\nllm:\n  retries: 2\n  backoff_base_ms: 50\n  backoff_max_ms: 500\n  request_timeout_s: 30\n`,
  );
  const sims: ServeProcess[] = await Promise.all([simProcess(['--config', simCfg]), simProcess(['--config', simCfg])]);
  const server = await serveProcess([
    '--config',
    path.join(dir, 'server.yaml'),
    '--handler',
    HANDLERS,
    '--llm',
    ...sims.map((s) => s.url),
    '--workers-run',
    String(Math.max(64, CONCURRENCY)),
  ]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const endAt = Date.now() + MINUTES * 60_000;
  const t0 = Date.now();
  const outcome = new Map<string, number>();
  const answered = new Map<string, number>();
  const ids: string[] = [];
  let seq = 0;
  let faults = 0;
  const samples: Array<{ t_s: number; rss_mb: number; heap_mb: number; done: number }> = [];

  const worker = async (): Promise<void> => {
    while (Date.now() < endAt) {
      const id = `soak-${seq++}`;
      ids.push(id);
      const sandboxed = Math.random() < SANDBOX_SHARE;
      const body = sandboxed
        ? { job_id: id, instance: { data_source: 'rel-sandbox', commands: ['echo $((6*7)) > a.txt; cat a.txt', 'echo SANDBOX-OK'] } }
        : {
            job_id: id,
            instance: { data_source: 'chat', turns: 1 + (seq % 3), pass_rate: 0.5 },
            sampling_params: { seed: seq, max_tokens_per_turn: 128 },
          };
      try {
        const a = await httpPost(`${server.url}/process`, body, agent, 300_000);
        const key = a.status === 200 ? `200 critical_error=${a.body.critical_error}` : `${a.status} ${a.body?.error?.code}`;
        outcome.set(key, (outcome.get(key) ?? 0) + 1);
        if (a.status === 200) answered.set(id, (answered.get(id) ?? 0) + 1);
      } catch (err) {
        outcome.set(
          `client error ${(err as Error).message.slice(0, 60)}`,
          (outcome.get(`client error ${(err as Error).message.slice(0, 60)}`) ?? 0) + 1,
        );
      }
    }
  };

  const faultLoop = async (): Promise<void> => {
    for (;;) {
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(FAULT_EVERY_S * 1000, endAt - Date.now()))));
      // No kill in the last few seconds: the final checks want a live backend to finish the tail.
      if (Date.now() + 5000 > endAt) return;
      const victim = sims.shift()!;
      await victim.kill('SIGKILL');
      faults++;
      const fresh = await simProcess(['--config', simCfg]);
      sims.push(fresh);
      await postJson(`${server.url}/add_llm_server`, { address: fresh.url });
      await postJson(`${server.url}/remove_llm_server`, { address: victim.url });
    }
  };

  // RSS, and the V8 heap in use from the server's /metrics (RSS keeps pages the collector freed, so
  // the heap is what says whether something accumulates).
  let sampling = true;
  const sampler = setInterval(() => {
    const done = answered.size;
    void heapUsedMb(server.url, agent).then((heap) => {
      if (!sampling) return; // the run ended while /metrics answered: the server may be gone
      const sample = { t_s: Math.round((Date.now() - t0) / 1000), rss_mb: Math.round(rssMb(server.pid)), heap_mb: Math.round(heap), done };
      samples.push(sample);
      process.stderr.write(
        `\rsoak ${sample.t_s} s: ${done} jobs answered, server RSS ${sample.rss_mb} MiB, heap ${sample.heap_mb} MiB, ${faults} backend kills   `,
      );
    });
  }, 5000);

  await Promise.all([...Array.from({ length: CONCURRENCY }, worker), faultLoop()]);
  clearInterval(sampler);
  sampling = false;
  const wallS = (Date.now() - t0) / 1000;

  // Every submitted id has exactly one terminal result on the server.
  let lost = 0;
  const states = new Map<string, number>();
  for (let i = 0; i < ids.length; i += 200) {
    const page = await Promise.all(ids.slice(i, i + 200).map((id) => httpGet(`${server.url}/jobs/${id}`, agent)));
    page.forEach((p, k) => {
      const s = p.body?.state ?? `http ${p.status}`;
      states.set(s, (states.get(s) ?? 0) + 1);
      if (!['done', 'failed', 'cancelled', 'timed_out'].includes(s) || answered.get(ids[i + k]) !== 1) lost++;
    });
  }
  const status = (await httpGet(`${server.url}/status`, agent)).body;
  const journalLines = fs.readFileSync(path.join(dir, 'journal/results.jsonl'), 'utf8').split('\n').filter(Boolean).length;
  const tree = descendantsOf(server.pid);
  agent.destroy();
  server.child.kill('SIGTERM');
  const exit = await server.exited;
  for (const s of sims) await s.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1000));
  const alive = new Set(processTable().map((p) => `${p.pid} ${p.cmd}`));
  const orphans = tree.filter((p) => alive.has(`${p.pid} ${p.cmd}`));
  const rss = samples.map((s) => s.rss_mb);
  const heap = samples.map((s) => s.heap_mb).filter((h) => Number.isFinite(h));
  // The heap's floor (its lowest sample, right after a major collection) in the third and the last
  // quarter of the run: the heap saws up and down between collections, so single samples say little.
  const floor = (from: number, to: number): number =>
    Math.min(
      ...samples
        .filter((x) => x.t_s >= from * MINUTES * 60 && x.t_s < to * MINUTES * 60 && Number.isFinite(x.heap_mb))
        .map((x) => x.heap_mb),
    );
  const result = {
    minutes: MINUTES,
    concurrency: CONCURRENCY,
    sandbox_share: SANDBOX_SHARE,
    jobs: ids.length,
    jobs_per_s: Math.round((ids.length / wallS) * 10) / 10,
    outcomes: Object.fromEntries(outcome),
    states: Object.fromEntries(states),
    backend_kills: faults,
    lost_jobs: lost,
    orphaned_processes: orphans.length,
    server_jobs_after: status.jobs,
    journal_lines: journalLines,
    sigterm_exit: exit.code,
    rss_mb: { first: rss[0], last: rss[rss.length - 1], max: Math.max(...rss) },
    heap_mb: { first: heap[0], last: heap[heap.length - 1], max: Math.max(...heap) },
    heap_floor_mb: { third_quarter: floor(0.5, 0.75), last_quarter: floor(0.75, Infinity) },
    samples,
  };
  process.stderr.write('\n');
  process.stdout.write(JSON.stringify({ ...result, samples: undefined }, null, 2) + '\n');
  // Flat: the floor in the last quarter is within 10 % of the floor in the third.
  const { third_quarter: q3, last_quarter: q4 } = result.heap_floor_mb;
  process.stdout.write(
    `memory: heap floor ${q3} MiB in the third quarter of the run, ${q4} MiB in the last: ${q4 <= q3 * 1.1 ? 'flat' : 'GROWS'}\n`,
  );
  if (flags.out) fs.writeFileSync(flags.out, JSON.stringify(result, null, 2) + '\n');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(root, { recursive: true, force: true });
  process.exit(lost === 0 && orphans.length === 0 && exit.code === 0 ? 0 : 1);
}

await main();
