/**
 * `npm run bench:swe-eval`: the swe handler's EVAL against one direct run of the instance's test
 * command, side by side in one run. The instance is real code nobody here wrote: sortedcontainers
 * 2.4.0 (Debian's orig tarball, pinned, cached in .raas/fixtures/debian) with its five
 * test_coverage suites, 291 tests: FAIL_TO_PASS one of them, PASS_TO_PASS the other 290. With
 * `evalBench({image})` (bench:swe), the instance is a SWE-bench row whose image (that Debian root
 * with the repository at /testbed) roots EVAL's sandbox, as handlers.swe.images_dir gives it.
 *   (a) EVAL of a patch that keeps every test passing: fresh bwrap sandbox, repository set up,
 *       patch applied, tests reset, the command run once with the tamper canaries, log parsed.
 *   (b) EVAL of a patch that breaks one PASS_TO_PASS test (SortedList.__copy__).
 *   (c) the baseline: the same command on the same checkout, run directly on the host.
 *   (d) the floor inside: the same command in an already-open sandbox (no setup, no grading).
 * Target: (a) and (b) ≤ 1.2 × (c). It also prints where (a)'s time goes: each process EVAL starts in
 * the sandbox, by kind, and the rest. Flags: --quick (fewer runs), --json.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createSandboxRuntime } from '../src/server/sandbox/index.js';
import type { Sandbox, SandboxSpec } from '../src/server/sandbox/types.js';
import type { StageContext } from '../src/server/handlers/types.js';
import type { SweInstance } from '../src/protocol/tasks.js';
import { SweInstance as SweInstanceSchema } from '../src/protocol/tasks.js';
import { evaluatePatch } from '../src/server/handlers/swe/index.js';
import { parseLog } from '../src/server/handlers/swe/parsers/index.js';
import { qwen3Tokenizer } from '../src/tokens/index.js';
import { archiveFile } from '../test/handlers/fixtures/debian-patch.js';

const quick = process.argv.includes('--quick');
const POOL = 'https://deb.debian.org/debian/pool/main/s/sortedcontainers';
const ORIG: [string, string] = ['sortedcontainers_2.4.0.orig.tar.gz', '70e22f4fd29b204f75f989e3c1e847aa1de267a028aab4233c0db783aaff78c1'];
const COMMAND = 'python3 -m pytest -rA -p no:cacheprovider';

export interface Stat {
  name: string;
  n: number;
  p50: number;
  min: number;
  max: number;
}
export function stat(name: string, xs: number[]): Stat {
  const s = [...xs].sort((a, b) => a - b);
  return { name, n: s.length, p50: s[Math.floor((s.length - 1) / 2)]!, min: s[0]!, max: s[s.length - 1]! };
}

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=raas', '-c', 'user.email=raas@localhost', '-c', 'init.defaultBranch=main', ...args], {
    cwd,
    encoding: 'utf8',
  });

/** The repository as a files map: the package and its tests (text files). */
function filesOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(r);
      else if (e.isFile() && /\.(py|cfg|ini|txt|toml)$/.test(e.name)) out[r] = fs.readFileSync(path.join(dir, r), 'utf8');
    }
  };
  for (const top of ['sortedcontainers', 'tests']) walk(top);
  for (const f of ['setup.py', 'tox.ini']) if (fs.existsSync(path.join(dir, f))) out[f] = fs.readFileSync(path.join(dir, f), 'utf8');
  return out;
}

/** A patch of the checkout: `edit` applied to `file`, as git diff prints it. */
function patchOf(dir: string, file: string, edit: (s: string) => string): string {
  const p = path.join(dir, file);
  const before = fs.readFileSync(p, 'utf8');
  const after = edit(before);
  if (after === before) throw new Error(`bench:swe-eval: the edit of ${file} changed nothing (sortedcontainers 2.4.0 expected)`);
  fs.writeFileSync(p, after);
  const diff = git(dir, 'diff');
  git(dir, 'checkout', '-q', '--', '.');
  return diff;
}

/** What a process EVAL starts in the sandbox is: the test run, a git subcommand, a script, … */
function phaseOf(argv: readonly string[]): string {
  if (argv[0] === 'timeout') return 'test command (with the canaries)';
  if (argv[0] === 'git') {
    let i = 1;
    while (argv[i] === '-c') i += 2;
    return `git ${argv[i] ?? ''}`;
  }
  if (argv[0] === 'bash') return 'bash scripts (repository set-up, patch staging, canary files)';
  if (argv[0] === 'find') return 'find: drop __pycache__';
  if (argv[0] === 'python3') return 'python3: standard-library shadow check';
  return argv[0] ?? '?';
}

export function loadavg(): string {
  return os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
}

/** What evalBench measures in: the host's userland with a files instance (default), or `image`, a root directory the instance's image is made from. */
export interface EvalBenchOptions {
  image?: string;
  runs?: number;
}

/** Runs the EVAL measurement and returns the printed lines (also the JSON rows). */
export async function evalBench(o: EvalBenchOptions = {}): Promise<{ lines: string[]; rows: Stat[] }> {
  const N = o.runs ?? (quick ? 3 : 9);
  const tmpBase = process.getuid?.() === 0 ? '/var/tmp' : os.tmpdir();
  const tmp = fs.mkdtempSync(path.join(tmpBase, 'raas-bench-swe-eval-'));
  const root = path.join(tmp, 'sandboxes');
  const rt = createSandboxRuntime({ runtime: 'bwrap', root });
  try {
    const orig = await archiveFile(POOL, ORIG[0], ORIG[1]);
    const repo = path.join(tmp, 'repo');
    fs.mkdirSync(repo);
    execFileSync('tar', ['-xzf', orig, '-C', repo, '--strip-components=1']);
    git(repo, 'init', '-q', '.');
    git(repo, 'add', '-A');
    git(repo, 'commit', '-q', '-m', 'sortedcontainers 2.4.0');
    const suites = fs
      .readdirSync(path.join(repo, 'tests'))
      .filter((f) => /^test_coverage_.*\.py$/.test(f))
      .sort()
      .map((f) => `tests/${f}`);
    const direct = (): { ms: number; log: string } => {
      const t = performance.now();
      const r = spawnSync('bash', ['-c', `exec 2>&1; ${COMMAND} "$@"`, 'x', ...suites], {
        cwd: repo,
        encoding: 'utf8',
        env: { PATH: '/usr/bin:/bin', HOME: tmp, PYTHONDONTWRITEBYTECODE: '1' },
      });
      return { ms: performance.now() - t, log: r.stdout };
    };
    const first = parseLog('pytest', direct().log);
    const passing = [...first.keys()].filter((k) => first.get(k) === 'PASSED');
    if (passing.length < 201) throw new Error(`bench:swe-eval: expected ≥ 201 passing tests, got ${passing.length}`);
    const [f2p, ...p2p] = passing as [string, ...string[]];
    const keep = patchOf(repo, 'sortedcontainers/sortedlist.py', (s) => s.replace('"""Sorted List\n', '"""Sorted List (benchmarked)\n'));
    const breaking = patchOf(repo, 'sortedcontainers/sortedlist.py', (s) =>
      s.replace(
        '        return self.__class__(self)\n\n    __copy__ = copy\n',
        '        return self.__class__(self)\n\n    def __copy__(self):\n        return self.__class__(list(self)[1:])\n',
      ),
    );
    // The image: the given root (hard-linked, nothing of it is changed) with the repository at /testbed.
    const images = path.join(tmp, 'images');
    const instanceId = 'grantjenks__python-sortedcontainers-2.4.0';
    if (o.image) {
      const dir = path.join(images, 'sweb.eval.x86_64.grantjenks_s_python-sortedcontainers-2.4.0');
      fs.mkdirSync(images);
      execFileSync('cp', ['-al', o.image, dir]);
      fs.rmSync(path.join(dir, 'testbed'), { recursive: true, force: true });
      execFileSync('git', ['clone', '-q', repo, path.join(dir, 'testbed')]);
    }
    execFileSync('chmod', ['-R', 'a+rX', tmp]);

    // The instance a researcher would send: files, the test command, the ids (appended as arguments);
    // in an image, a SWE-bench row naming its repository and commit.
    const inst: SweInstance = SweInstanceSchema.parse({
      problem_statement: 'bench',
      ...(o.image
        ? { instance_id: instanceId, repo: 'grantjenks/python-sortedcontainers', base_commit: git(repo, 'rev-parse', 'HEAD').trim() }
        : { files: filesOf(repo) }),
      test_command: COMMAND,
      FAIL_TO_PASS: [f2p],
      PASS_TO_PASS: p2p,
    });
    const opened: Sandbox[] = [];
    // Where EVAL's time goes: each process it starts in the sandbox, by what it is, per run.
    let phases = new Map<string, number>();
    const phase = (name: string, t0: number): void => {
      phases.set(name, (phases.get(name) ?? 0) + performance.now() - t0);
    };
    const timed = (sb: Sandbox): Sandbox => {
      const exec = async (argv: string[], o?: Parameters<Sandbox['exec']>[1]): ReturnType<Sandbox['exec']> => {
        const t = performance.now();
        try {
          return await sb.exec(argv, o);
        } finally {
          phase(phaseOf(argv), t);
        }
      };
      return new Proxy(sb, {
        get: (target, k) => {
          if (k === 'exec') return exec;
          const v: unknown = Reflect.get(target, k, target);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    };
    const ctx: StageContext<SweInstance> = {
      job: { id: 'bench', instance: inst, samplingParams: {}, groupId: undefined, policyVersion: undefined, seed: 1 },
      signal: new AbortController().signal,
      config: o.image ? { images_dir: images } : {},
      log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
      sandboxes: {
        open: async (spec: SandboxSpec, s?: AbortSignal) => {
          const t = performance.now();
          const sb = await rt.open(spec, s);
          phase('sandbox open', t);
          opened.push(sb);
          return timed(sb);
        },
      },
      tokenizer: qwen3Tokenizer(),
    };
    const evalOnce = async (patch: string): Promise<{ ms: number; failed: string[]; resolved: boolean; phases: Map<string, number> }> => {
      phases = new Map();
      const t = performance.now();
      const r = await evaluatePatch(ctx, patch, { testTimeoutS: 300 });
      const ms = performance.now() - t;
      // evaluatePatch closes its sandbox itself (inside `ms`); this only catches a leftover.
      await Promise.all(opened.splice(0).map((s) => s.close()));
      let inSandbox = 0;
      for (const v of phases.values()) inSandbox += v;
      phases.set('the rest: host side (repository files, log parsing, report) and sandbox close', ms - inSandbox);
      const failed = Object.entries({ ...r.details.FAIL_TO_PASS, ...r.details.PASS_TO_PASS })
        .filter(([, s]) => s !== 'PASSED')
        .map(([k]) => k);
      if (r.filter_reason)
        throw new Error(`bench:swe-eval: EVAL filtered the run (${r.filter_reason}): ${JSON.stringify(r.details).slice(0, 2000)}`);
      return { ms, failed, resolved: r.resolved, phases };
    };

    const a: number[] = [];
    const b: number[] = [];
    const c: number[] = [];
    const d: number[] = [];
    const aPhases: Array<Map<string, number>> = [];
    let aOut: Awaited<ReturnType<typeof evalOnce>> | undefined;
    let bOut: Awaited<ReturnType<typeof evalOnce>> | undefined;
    // An open sandbox with the repository, for the floor inside (d).
    const inside = o.image
      ? await rt.open({
          network: false,
          tools: [],
          rootImage: { ref: path.join(images, 'sweb.eval.x86_64.grantjenks_s_python-sortedcontainers-2.4.0'), workdir: '/testbed' },
        })
      : await rt.open({ network: false, tools: [], files: filesOf(repo) });
    const insideRun = async (): Promise<number> => {
      const t = performance.now();
      await inside.exec(['bash', '--noprofile', '--norc', '-c', `exec 2>&1; ${COMMAND} "$@"`, 'x', ...suites], {
        timeout_s: 300,
        env: { HOME: '/tmp', PYTHONDONTWRITEBYTECODE: '1' },
        maxOutputBytes: 16 << 20,
      });
      return performance.now() - t;
    };
    // One warm-up of each, then interleaved so load changes hit all four alike.
    await evalOnce(keep);
    direct();
    await insideRun();
    for (let i = 0; i < N; i++) {
      aOut = await evalOnce(keep);
      a.push(aOut.ms);
      aPhases.push(aOut.phases);
      bOut = await evalOnce(breaking);
      b.push(bOut.ms);
      c.push(direct().ms);
      d.push(await insideRun());
    }
    await inside.close();

    const rows = [
      stat(`(a) EVAL, ${p2p.length} PASS_TO_PASS, all pass`, a),
      stat('(b) EVAL, one PASS_TO_PASS test broken', b),
      stat('(c) baseline: the test command run directly on the host', c),
      stat('(d) floor: the test command in an open sandbox', d),
    ];
    const lines = [
      `${o.image ? "EVAL in the instance's own image (a Debian root, the repository at /testbed)" : 'bench:swe-eval'} — sortedcontainers 2.4.0, ${suites.length} suites, ${passing.length} tests; command: ${COMMAND} ${suites.join(' ')}`,
      `load average before/after: see below; runs per row: ${N} (interleaved); machine: ${os.cpus().length} cores`,
      '',
      '| measurement | n | p50 ms | min ms | max ms |',
      '|---|---:|---:|---:|---:|',
      ...rows.map((r) => `| ${r.name} | ${r.n} | ${r.p50.toFixed(0)} | ${r.min.toFixed(0)} | ${r.max.toFixed(0)} |`),
      '',
      '| ratio (p50) | value | target |',
      '|---|---:|---:|',
      `| (a) / (c) | ${(rows[0]!.p50 / rows[2]!.p50).toFixed(2)}× | ≤ 1.2× |`,
      `| (b) / (c) | ${(rows[1]!.p50 / rows[2]!.p50).toFixed(2)}× | ≤ 1.2× |`,
      `| (a) / (d) | ${(rows[0]!.p50 / rows[3]!.p50).toFixed(2)}× | (grading's own cost) |`,
      '',
      'where (a) spends its time (p50 of each phase over its runs):',
      '',
      '| phase | p50 ms | min ms | max ms |',
      '|---|---:|---:|---:|',
      ...[...new Set(aPhases.flatMap((m) => [...m.keys()]))]
        .map((k) =>
          stat(
            k,
            aPhases.map((m) => m.get(k) ?? 0),
          ),
        )
        .map((r) => `| ${r.name} | ${r.p50.toFixed(0)} | ${r.min.toFixed(0)} | ${r.max.toFixed(0)} |`),
      '',
      `(a) resolved ${aOut?.resolved}, failing ${aOut?.failed.length}; (b) resolved ${bOut?.resolved}, failing ${JSON.stringify(bOut?.failed)}`,
      `load average now: ${loadavg()}`,
    ];
    if (!aOut?.resolved || bOut?.resolved || bOut?.failed.length !== 1)
      throw new Error(`bench:swe-eval: grading went wrong: ${lines.at(-2)}`);
    return { lines, rows };
  } finally {
    await rt.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  process.stderr.write(`load average at start: ${loadavg()}\n`);
  const { lines, rows } = await evalBench();
  process.stdout.write(`${lines.join('\n')}\n`);
  if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify({ rows, loadavg: os.loadavg() })}\n`);
}

// Run as `npm run bench:swe-eval`; bench:swe imports evalBench.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e: unknown) => {
    process.stderr.write(`bench:swe-eval failed: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
