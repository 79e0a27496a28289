/**
 * `npm run bench:swe`: SWE-bench as it is run, each instance in its own image.
 *   1. Start of a sandbox until its tool server answers: rooted in a Debian image (mmdebstrap,
 *      python3 + pytest + git, test/helpers/images.ts) as an unpacked directory, a .sif and an OCI
 *      layout, each cold (the image cache empty: the conversion included) and cached, against
 *      today's host-rooted start and the floor `bwrap … true`. Target: cached image-rooted ≤ 1.5×
 *      host-rooted.
 *   2. EVAL of a SWE-bench row in its own image (that Debian root with sortedcontainers 2.4.0 at
 *      /testbed, 291 tests, 290 of them PASS_TO_PASS; bench/swe-eval.ts's instance), with every
 *      test passing and with one PASS_TO_PASS test broken, against one direct run of its test
 *      command. Target ≤ 1.2×.
 * Flags: --quick (fewer runs), --json.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { resolveIdentity } from '../src/server/sandbox/host.js';
import { createSandboxRuntime } from '../src/server/sandbox/index.js';
import { debianImage, ociOf, sifOf } from '../test/helpers/images.js';
import { evalBench, loadavg, stat, type Stat } from './swe-eval.js';

const quick = process.argv.includes('--quick');
const N = quick ? 5 : 21;
const COLD = quick ? 1 : 3;

/** `bwrap … true` as the sandbox user: the start of a bare host-rooted bwrap, nothing of ours in it. */
function bwrapTrue(): number {
  const id = process.getuid?.() === 0 ? resolveIdentity('raas-sandbox') : undefined;
  const args = ['--unshare-user', '--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--die-with-parent', '--clearenv'];
  args.push(
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
  );
  args.push('--ro-bind', '/etc', '/etc', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', 'true');
  const t = performance.now();
  const r = spawnSync('bwrap', args, { uid: id?.uid, gid: id?.gid, cwd: '/' });
  if (r.status !== 0) throw new Error(`bench:swe: bwrap … true failed: ${r.stderr}`);
  return performance.now() - t;
}

async function main(): Promise<void> {
  process.stderr.write(`load average at start: ${loadavg()}\n`);
  const debian = await debianImage();
  const refs = { directory: debian, sif: await sifOf('debian', debian), oci: await ociOf('debian', debian) };
  const tmp = fs.mkdtempSync(path.join(process.getuid?.() === 0 ? '/var/tmp' : os.tmpdir(), 'raas-bench-swe-'));
  const rt = createSandboxRuntime({ runtime: 'bwrap', root: tmp });
  const rows: Stat[] = [];
  try {
    const open = async (spec: Parameters<typeof rt.open>[0]): Promise<number> => {
      const t = performance.now();
      const sb = await rt.open(spec);
      const ms = performance.now() - t;
      await sb.close();
      return ms;
    };
    // Warm-up: the tool server's install, the patched node, the overlay probe, one of each start.
    await open({});
    for (const ref of Object.values(refs)) await open({ rootImage: { ref } });
    const floor: number[] = [];
    const host: number[] = [];
    const cached: Record<string, number[]> = { directory: [], sif: [], oci: [] };
    for (let i = 0; i < N; i++) {
      floor.push(bwrapTrue());
      host.push(await open({}));
      for (const [form, ref] of Object.entries(refs)) cached[form]!.push(await open({ rootImage: { ref } }));
    }
    const cold: Record<string, number[]> = { directory: [], sif: [], oci: [] };
    for (let i = 0; i < COLD; i++) {
      for (const [form, ref] of Object.entries(refs)) {
        // The cache forgets the image: its entry is removed, so this start converts it again.
        const img = await rt.roots.store().resolve(ref);
        fs.rmSync(path.dirname(img.dir), { recursive: true, force: true });
        cold[form]!.push(await open({ rootImage: { ref } }));
      }
    }
    rows.push(stat('floor: bwrap … true (host-rooted, nothing of ours)', floor));
    rows.push(stat("host-rooted start (today's sandboxes)", host));
    for (const form of Object.keys(refs)) rows.push(stat(`image-rooted start, cached: ${form}`, cached[form]!));
    for (const form of Object.keys(refs)) rows.push(stat(`image-rooted start, cold (conversion included): ${form}`, cold[form]!));
  } finally {
    await rt.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const p50 = (name: string): number => rows.find((r) => r.name === name)!.p50;
  const hostP50 = p50("host-rooted start (today's sandboxes)");
  const lines = [
    `bench:swe — sandbox start until the tool server answers; image: Debian 12 minbase + python3, python3-pytest, git, patch (mmdebstrap); runs: ${N} cached, ${COLD} cold; ${os.cpus().length} cores`,
    '',
    '| measurement | n | p50 ms | min ms | max ms |',
    '|---|---:|---:|---:|---:|',
    ...rows.map((r) => `| ${r.name} | ${r.n} | ${r.p50.toFixed(0)} | ${r.min.toFixed(0)} | ${r.max.toFixed(0)} |`),
    '',
    '| ratio (p50) | value | target |',
    '|---|---:|---:|',
    ...['directory', 'sif', 'oci'].map(
      (f) => `| image-rooted cached (${f}) / host-rooted | ${(p50(`image-rooted start, cached: ${f}`) / hostP50).toFixed(2)}× | ≤ 1.5× |`,
    ),
    `| host-rooted / floor | ${(hostP50 / p50('floor: bwrap … true (host-rooted, nothing of ours)')).toFixed(2)}× | (the tool server's own start) |`,
    '',
    `load average now: ${loadavg()}`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  const ev = await evalBench({ image: debian, runs: quick ? 3 : 9 });
  process.stdout.write(`${ev.lines.join('\n')}\n`);
  if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify({ starts: rows, eval: ev.rows, loadavg: os.loadavg() })}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`bench:swe failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
