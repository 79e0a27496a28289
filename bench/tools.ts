/**
 * `npm run bench:tools`: tool latency side by side in one run, medians and p95, plus ratios.
 *   (a) `echo hi` through the full path (client → Unix socket → tool server → PTY bash → back) in bwrap
 *   (b) the tmux baseline (OpenHands: send-keys + capture-pane polling) at 500 ms and at 10 ms
 *   (c) a fresh `bash -c` spawn per command
 *   (d) python `x = 1`: persistent interpreter vs a fresh `python3 -c` per call
 *   (e) sandbox start until the tool server answers: bwrap vs process runtime, interleaved with the
 *       floors `node -e 0`, `bwrap … true` and `bwrap … node -e 0` (target: ≤ 1.3× the last)
 * Targets printed at the end: (a) and (d) p50 and p95 ≤ 1 ms (seccomp filter on, the default).
 * Flags: --quick (fewer iterations), --json (machine-readable line at the end).
 */
import { execFile, spawn } from 'node:child_process';
import os from 'node:os';
import { resolveIdentity } from '../src/server/sandbox/host.js';
import { createSandboxRuntime } from '../src/server/sandbox/index.js';
import type { Sandbox } from '../src/server/sandbox/types.js';

const quick = process.argv.includes('--quick');
const N = quick ? 100 : 500;

interface Stat {
  name: string;
  n: number;
  p50: number;
  p95: number;
}

function quantile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))];
}

function stat(name: string, xs: number[]): Stat {
  return { name, n: xs.length, p50: quantile(xs, 0.5), p95: quantile(xs, 0.95) };
}

async function time(n: number, warm: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < warm; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

function run(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => execFile(file, args, (e, out) => (e ? reject(e) : resolve(out))));
}

async function expectOutput(sb: Sandbox, cmd: string, want: string): Promise<void> {
  const r = await sb.bash(cmd);
  if (!r.output.includes(want)) throw new Error(`unexpected output ${JSON.stringify(r.output)}`);
}

const loadavg = (): string =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const loadAtStart = loadavg();
  const results: Stat[] = [];
  const log = (s: Stat): void => {
    results.push(s);
    process.stderr.write(`${s.name.padEnd(44)} n=${String(s.n).padStart(4)}  p50 ${s.p50.toFixed(3)} ms  p95 ${s.p95.toFixed(3)} ms\n`);
  };

  const bwrap = createSandboxRuntime({ runtime: 'bwrap' });
  const proc = createSandboxRuntime(
    { runtime: 'process' },
    { log: { warn: () => undefined, info: () => undefined, debug: () => undefined, error: () => undefined } },
  );

  // (a) full path in bwrap
  const sb = await bwrap.open({});
  log(stat('(a) echo hi, PTY bash in bwrap (full path)', await time(N, 50, () => expectOutput(sb, 'echo hi', 'hi'))));

  // (d) python persistent vs fresh
  log(stat('(d) python x = 1, persistent (bwrap)', await time(N, 50, () => sb.python('x = 1'))));
  log(stat('(d) python x = 1, fresh python3 -c per call', await time(quick ? 20 : 60, 3, () => run('/usr/bin/python3', ['-c', 'x = 1']))));
  await sb.close();

  // (b) tmux baseline, same full path, in bwrap
  for (const poll of [500, 10]) {
    const rt = createSandboxRuntime({ runtime: 'bwrap', bash_backend: 'tmux', tmux_poll_ms: poll });
    const t = await rt.open({ tools: ['bash'] });
    const n = poll >= 500 ? (quick ? 6 : 20) : quick ? 30 : 100;
    log(stat(`(b) echo hi, tmux baseline poll ${poll} ms (bwrap)`, await time(n, 2, () => expectOutput(t, 'echo hi', 'hi'))));
    await rt.close();
  }

  // (c) a fresh bash -c per command
  log(stat('(c) echo hi, fresh bash -c spawn', await time(quick ? 50 : 200, 5, () => run('/bin/bash', ['-c', 'echo hi']))));

  // (e) start until the tool server answers, interleaved with the floors (what any node process costs
  // to start, on the host and in bwrap) so that a loaded machine weighs on both alike.
  const id = process.getuid?.() === 0 ? resolveIdentity('raas-sandbox') : undefined;
  const floorArgs = [
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-net',
    '--die-with-parent',
    '--new-session',
    '--clearenv',
    '--ro-bind',
    '/usr',
    '/usr',
    '--symlink',
    'usr/bin',
    '/bin',
    '--symlink',
    'usr/lib',
    '/lib',
    '--symlink',
    'usr/lib64',
    '/lib64',
    '--ro-bind',
    '/etc',
    '/etc',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
  ];
  const spawnWait = (file: string, args: string[], asSandbox: boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      // The same clean environment the tool server gets (no NODE_OPTIONS or CA bundles from the host).
      const c = spawn(file, args, {
        stdio: 'ignore',
        env: { PATH: '/usr/bin:/bin' },
        uid: asSandbox ? id?.uid : undefined,
        gid: asSandbox ? id?.gid : undefined,
      });
      c.on('error', reject);
      c.on('exit', () => resolve());
    });
  const startOnce = async (rt: typeof bwrap): Promise<number> => {
    const t = performance.now();
    const s = await rt.open({});
    await s.edit({ command: 'view', path: '.' });
    const ms = performance.now() - t;
    const c = performance.now();
    await s.close();
    closeMs.push(performance.now() - c);
    return ms;
  };
  const timed = async (fn: () => Promise<unknown>): Promise<number> => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  const n = quick ? 10 : 30;
  const eRuns = {
    bwrap: [] as number[],
    process: [] as number[],
    hostNode: [] as number[],
    bwrapTrue: [] as number[],
    bwrapNode: [] as number[],
  };
  const paired: number[] = [];
  for (let i = 0; i < n + 2; i++) {
    const b = await startOnce(bwrap);
    const f = await timed(() => spawnWait('bwrap', [...floorArgs, process.execPath, '-e', '0'], true));
    const p = await startOnce(proc);
    const h = await timed(() => spawnWait(process.execPath, ['-e', '0'], false));
    const tr = await timed(() => spawnWait('bwrap', [...floorArgs, '/usr/bin/true'], true));
    if (i < 2) continue;
    eRuns.bwrap.push(b);
    eRuns.bwrapNode.push(f);
    eRuns.process.push(p);
    eRuns.hostNode.push(h);
    eRuns.bwrapTrue.push(tr);
    paired.push(b / f);
  }
  log(stat('(e) sandbox start → tool server answers, bwrap', eRuns.bwrap));
  log(stat('(e) sandbox start → tool server answers, process', eRuns.process));
  // (e') open() from a warm pool: the start is off the critical path, open() is a configure round trip.
  {
    const pooled = createSandboxRuntime({ runtime: 'bwrap', pool_size: 2 });
    pooled.warmup();
    const xs: number[] = [];
    for (let i = 0; i < n; i++) {
      // Let the pool refill (started and warmed) between opens, as it would between INIT stages of a busy server.
      await pooled.poolReady();
      await new Promise((r) => setTimeout(r, 20));
      const t = performance.now();
      // open() returns once the tool server answered its configure request.
      const s = await pooled.open({ files: { 'task.txt': 'x' } });
      xs.push(performance.now() - t);
      await s.edit({ command: 'view', path: '.' });
      await s.close();
    }
    log(stat("(e') open() from a warm pool (pool_size 2), bwrap", xs));
    await pooled.close();
  }
  log(stat('(e) floor: node -e 0 on the host', eRuns.hostNode));
  log(stat('(e) floor: bwrap … true', eRuns.bwrapTrue));
  log(stat('(e) floor: bwrap … node -e 0', eRuns.bwrapNode));
  const pairedStat = stat('(e) bwrap start ÷ the floor started right after it', paired);
  await bwrap.close();
  await proc.close();

  const get = (prefix: string): Stat => results.find((r) => r.name.startsWith(prefix))!;
  const a = get('(a)');
  const tmux500 = get('(b) echo hi, tmux baseline poll 500');
  const tmux10 = get('(b) echo hi, tmux baseline poll 10 ');
  const fresh = get('(c)');
  const pyP = get('(d) python x = 1, persistent');
  const pyF = get('(d) python x = 1, fresh');
  const eB = get('(e) sandbox start → tool server answers, bwrap');
  const eP = get('(e) sandbox start → tool server answers, process');
  const floorNode = get('(e) floor: bwrap … node');
  const ratios = {
    'tmux 500 ms / PTY (p50)': tmux500.p50 / a.p50,
    'tmux 10 ms / PTY (p50)': tmux10.p50 / a.p50,
    'bash -c spawn / PTY (p50)': fresh.p50 / a.p50,
    'fresh python3 / persistent (p50)': pyF.p50 / pyP.p50,
    'bwrap start / process start (p50)': eB.p50 / eP.p50,
    'bwrap start / bare node in bwrap (p50)': eB.p50 / floorNode.p50,
    'bwrap start / the floor right after it (median of pairs)': pairedStat.p50,
  };
  const lines = ['| measurement | n | p50 ms | p95 ms |', '|---|---:|---:|---:|'];
  for (const r of results) lines.push(`| ${r.name} | ${r.n} | ${r.p50.toFixed(3)} | ${r.p95.toFixed(3)} |`);
  lines.push('', '| ratio | value |', '|---|---:|');
  for (const [k, v] of Object.entries(ratios)) lines.push(`| ${k} | ${v.toFixed(1)}× |`);
  const ratioE = eB.p50 / floorNode.p50;
  const met = (ok: boolean): string => (ok ? 'met' : 'MISSED');
  lines.push(
    '',
    `Targets: (a) p50 ≤ 1 ms: ${met(a.p50 <= 1)} (${a.p50.toFixed(3)}); (a) p95 ≤ 1 ms: ${met(a.p95 <= 1)} (${a.p95.toFixed(3)}); ` +
      `(a) ≥ 100× faster than tmux at 0.5 s: ${met(ratios['tmux 500 ms / PTY (p50)'] >= 100)}; ` +
      `(d) persistent p50 ≤ 1 ms: ${met(pyP.p50 <= 1)} (${pyP.p50.toFixed(3)}); (d) p95 ≤ 1 ms: ${met(pyP.p95 <= 1)} (${pyP.p95.toFixed(3)}); ` +
      `(e) bwrap p50 ≤ 1.3× the floor \`bwrap … node -e 0\`: ${met(ratioE <= 1.3)} (${eB.p50.toFixed(1)} ms ÷ ${floorNode.p50.toFixed(1)} ms = ${ratioE.toFixed(2)}×; ` +
      `median of paired ratios ${pairedStat.p50.toFixed(2)}×, p5–p95 ${quantile(paired, 0.05).toFixed(2)}–${pairedStat.p95.toFixed(2)}×).`,
    `Sandbox close (graceful stop → process-table check), bwrap and process mixed: p50 ${stat('close', closeMs).p50.toFixed(1)} ms.`,
    `Load average (1, 5, 15 min) at the start: ${loadAtStart}; at the end: ${loadavg()}; ${os.cpus().length} cores.`,
  );
  process.stdout.write(lines.join('\n') + '\n');
  if (process.argv.includes('--json')) process.stdout.write(JSON.stringify({ results, ratios }) + '\n');
}

const closeMs: number[] = [];

main().catch((e: unknown) => {
  process.stderr.write(`bench:tools failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
