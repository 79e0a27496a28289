// Red-team harness: a real rollout server (in-process, port 0, bwrap runtime, its own sandbox root
// under /var/tmp), the real simulated vLLM backend driven by scripted tool calls, planted host
// secrets, and the "host unharmed" checks (planted files unchanged, no process of ours left, the
// server answers quickly, the sandbox root did not grow).
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { descendantsOf, processTable, waitGone, type Proc } from '../helpers/procs.js';

export { descendantsOf, processTable, waitGone, type Proc } from '../helpers/procs.js';
import { startRolloutServer, type RolloutServer, type ServerConfigInput } from '../../src/server/index.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startSim, type SimHandle, type SimOptions } from '../../src/sim/index.js';
import type { PolicyContext } from '../../src/sim/policy.js';
import { call, scriptPolicy } from '../agent/script-policy.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const IS_ROOT = process.getuid?.() === 0;
export const hex = (n = 8): string => randomBytes(n).toString('hex');

// ---------------------------------------------------------------------------------------------
// Planted secrets
// ---------------------------------------------------------------------------------------------

/** Secrets planted on the host before the server starts; none of `values` may ever reach a result. */
export interface Secrets {
  /** Path-safe id of this file's run (part of every planted path, never a secret itself). */
  tag: string;
  /** Root-only directories: /root/.raas-rt-<tag>, /var/tmp/raas-rt-<tag>, /tmp/raas-rt-<tag>. */
  rootDir: string;
  varTmpDir: string;
  tmpDir: string;
  /** What a program printing the oracle outputs: the expected output of "oracle" code tasks. */
  oracle: string;
  /** Name and value of the environment variable planted in the server's process.env. */
  envName: string;
  envValue: string;
  /** The API token the server requires. */
  token: string;
  /** Marker in argv of every background process an attack starts (for the process-table check). */
  procMark: string;
  /** name → secret string; a result containing any of them leaked it. */
  values: Record<string, string>;
  /** Well-known paths of planted files. */
  files: {
    rootSecret: string;
    rootOraclePy: string;
    rootOracleTxt: string;
    varTmpSecret: string;
    varTmpTar: string;
    tmpSecret: string;
    tmpOraclePy: string;
    tmpGitDir: string;
    victimDir: string;
  };
}

function writeSecret(file: string, content: string | Buffer): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, content, { mode: 0o600 });
}

/** Plants root-only files under /root, /var/tmp and /tmp, an env var and a token (call before the server starts). */
export function plantSecrets(name: string): Secrets {
  const tag = `${name}-${process.pid}-${hex(3)}`;
  const v = (k: string): string => `RT${k}${hex(12)}`;
  const values = {
    rootFile: v('root'),
    varTmpFile: v('vartmp'),
    tmpFile: v('tmp'),
    gitPatchFile: v('gitpatch'),
    tarFile: v('tar'),
    oracle: v('oracle'),
    env: v('env'),
    token: v('token'),
  };
  const rootDir = IS_ROOT ? `/root/.raas-rt-${tag}` : path.join(os.homedir(), `.raas-rt-${tag}`);
  const varTmpDir = `/var/tmp/raas-rt-${tag}`;
  const tmpDir = `/tmp/raas-rt-${tag}`;
  const files = {
    rootSecret: `${rootDir}/secret.txt`,
    rootOraclePy: `${rootDir}/oracle.py`,
    rootOracleTxt: `${rootDir}/oracle.txt`,
    varTmpSecret: `${varTmpDir}/secret.txt`,
    varTmpTar: `${varTmpDir}/repo.tar`,
    tmpSecret: `${tmpDir}/secret.txt`,
    tmpOraclePy: `${tmpDir}/oracle.py`,
    tmpGitDir: `${tmpDir}/gitdir`,
    victimDir: `${varTmpDir}/victim`,
  };
  writeSecret(files.rootSecret, `${values.rootFile}\n`);
  writeSecret(files.rootOraclePy, `print("${values.oracle}")\n`);
  writeSecret(files.rootOracleTxt, `${values.oracle}\n`);
  writeSecret(files.varTmpSecret, `${values.varTmpFile}\n`);
  writeSecret(files.tmpSecret, `${values.tmpFile}\n`);
  writeSecret(files.tmpOraclePy, `print("${values.oracle}")\n`);
  // A host file at the path the swe handler reads the captured patch from, if .git pointed here.
  writeSecret(`${files.tmpGitDir}/raas.patch`, `${values.gitPatchFile}\n`);
  writeSecret(`${files.victimDir}/keep.txt`, 'keep me\n');
  writeSecret(`${files.victimDir}/sub/keep2.txt`, 'keep me too\n');
  // A real tarball with a secret in it, outside any data directory.
  const tarSrc = fs.mkdtempSync(path.join(varTmpDir, 'tarsrc-'));
  fs.writeFileSync(path.join(tarSrc, 'leak.txt'), `${values.tarFile}\n`);
  spawnSync('tar', ['-cf', files.varTmpTar, '-C', tarSrc, 'leak.txt']);
  fs.rmSync(tarSrc, { recursive: true, force: true });
  fs.chmodSync(files.varTmpTar, 0o600);
  const envName = `RAAS_RT_SECRET_${hex(4).toUpperCase()}`;
  process.env[envName] = values.env;
  return {
    tag,
    rootDir,
    varTmpDir,
    tmpDir,
    oracle: values.oracle,
    envName,
    envValue: values.env,
    token: values.token,
    procMark: `rtp${hex(5)}`,
    values,
    files,
  };
}

/** Removes the planted files and the env var. */
export function removeSecrets(s: Secrets | undefined): void {
  if (!s) return;
  delete process.env[s.envName];
  for (const d of [s.rootDir, s.varTmpDir, s.tmpDir]) fs.rmSync(d, { recursive: true, force: true });
}

/** A fingerprint of every file under the planted directories (path → mode, owner, sha256). */
export function snapshotPlanted(s: Secrets): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (p: string): void => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    const head = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} ${st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : st.isFile() ? 'file' : 'other'}`;
    if (st.isDirectory()) {
      out.set(p, head);
      for (const e of fs.readdirSync(p)) walk(path.join(p, e));
    } else if (st.isFile()) out.set(p, `${head} ${createHash('sha256').update(fs.readFileSync(p)).digest('hex')}`);
    else out.set(p, head);
  };
  for (const d of [s.rootDir, s.varTmpDir, s.tmpDir]) walk(d);
  return out;
}

/** Asserts the planted tree is exactly as snapshotted: nothing changed, removed or added. */
export function expectPlantedUnchanged(before: Map<string, string>, s: Secrets): void {
  const after = snapshotPlanted(s);
  const diff: string[] = [];
  for (const [p, v] of before) if (after.get(p) !== v) diff.push(`${p}: ${v} -> ${after.get(p) ?? 'GONE'}`);
  for (const [p, v] of after) if (!before.has(p)) diff.push(`${p}: NEW ${v}`);
  expect(diff, `planted host files changed:\n${diff.join('\n')}`).toEqual([]);
}

/** The secrets (and the first /etc/shadow line, when readable) found in `text`. */
export function leaksIn(text: string, s: Secrets): string[] {
  const found: string[] = [];
  const probes: Record<string, string> = { ...s.values, envName: s.envName };
  const shadow = shadowLine();
  if (shadow) probes.etcShadow = shadow;
  for (const [k, line] of serverEnvLines()) probes[`serverEnviron:${k}`] = line;
  for (const [k, v] of Object.entries(probes)) {
    const at = text.indexOf(v);
    if (at >= 0) found.push(`${k} (…${JSON.stringify(text.slice(Math.max(0, at - 80), at + v.length + 40))}…)`);
  }
  return found;
}

/** The whole answer text must contain none of the planted secrets. */
export function expectNoLeak(text: string, s: Secrets): void {
  const found = leaksIn(text, s);
  expect(found, `host secrets leaked into the job result: ${found.join('; ')}`).toEqual([]);
}

/** Keys a sandbox's own environment has too: their lines prove nothing. */
const SANDBOX_ENV_KEYS = new Set([
  'PATH',
  'HOME',
  'TERM',
  'LANG',
  'LC_ALL',
  'HISTFILE',
  'NO_COLOR',
  'PWD',
  'OLDPWD',
  'SHLVL',
  '_',
  'PAGER',
  'GIT_PAGER',
  'PS1',
  'PS2',
  'SHELL',
  'USER',
  'LOGNAME',
  'TMPDIR',
  'PYTHONUNBUFFERED',
  'PYTHONDONTWRITEBYTECODE',
  'PYTHONNOUSERSITE',
]);
let envCache: Array<[string, string]> | undefined;
/**
 * Distinctive `KEY=VALUE` lines of this process's real environment block (what /proc/<pid>/environ
 * shows; a variable set later through process.env is not in it). The in-process server is this
 * process, so any of these lines in a result means the server's environment leaked.
 */
export function serverEnvLines(): Array<[string, string]> {
  if (!envCache) {
    envCache = [];
    try {
      for (const e of fs.readFileSync('/proc/self/environ', 'utf8').split('\0')) {
        const at = e.indexOf('=');
        if (at <= 0) continue;
        const k = e.slice(0, at);
        const v = e.slice(at + 1);
        if (!SANDBOX_ENV_KEYS.has(k) && v.length >= 12 && /^[\w.,:/@+=-]+$/.test(v)) envCache.push([k, e]);
      }
    } catch {
      /* no procfs */
    }
  }
  return envCache;
}

let shadowCache: string | null | undefined;
/** The first line of /etc/shadow with a real hash field, or the first line (root only). */
function shadowLine(): string | undefined {
  if (shadowCache === undefined) {
    try {
      const lines = fs
        .readFileSync('/etc/shadow', 'utf8')
        .split('\n')
        .filter((l) => l.includes(':'));
      shadowCache = lines.find((l) => (l.split(':')[1] ?? '').length > 4) ?? lines[0] ?? null;
    } catch {
      shadowCache = null;
    }
  }
  return shadowCache ?? undefined;
}

// ---------------------------------------------------------------------------------------------
// Process table
// ---------------------------------------------------------------------------------------------

/**
 * Watches the process table while a file runs: every pid namespace entered by a descendant of
 * `rootPid` (the sandboxes of our server) is remembered, so processes that left the tree (setsid,
 * double fork) are still found by their namespace afterwards.
 */
export class ProcWatch {
  readonly namespaces = new Set<string>();
  private readonly own: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly rootPid: number,
    private readonly marks: string[],
  ) {
    try {
      this.own = fs.readlinkSync('/proc/self/ns/pid');
    } catch {
      this.own = undefined;
    }
    this.timer = setInterval(() => this.sample(), 150);
    this.timer.unref();
  }
  sample(table = processTable()): void {
    for (const p of descendantsOf(this.rootPid, table)) if (p.ns && p.ns !== this.own) this.namespaces.add(p.ns);
    for (const p of table) if (p.ns && p.ns !== this.own && this.marks.some((m) => p.cmd.includes(m))) this.namespaces.add(p.ns);
  }
  /** Processes still alive in one of our sandboxes' namespaces, or carrying one of our markers. */
  leftovers(): Proc[] {
    const table = processTable();
    this.sample(table);
    return table.filter(
      (p) => p.pid !== process.pid && ((p.ns !== undefined && this.namespaces.has(p.ns)) || this.marks.some((m) => p.cmd.includes(m))),
    );
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

/** A process's state letter and kernel wait channel (why a killed process may still be there). */
function stateOf(pid: number): string {
  try {
    const st = /^State:\s+(.+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '?';
    const wchan = fs.readFileSync(`/proc/${pid}/wchan`, 'utf8');
    return `${st} wchan=${wchan || '-'}`;
  } catch {
    return 'gone';
  }
}

/**
 * The end-of-file process-table check: no process of our sandboxes is left, and the server agrees
 * (/status: no sandbox open, no close that left processes behind, no job live). On failure the
 * message says which: a sandbox never closed (open > 0) or one that survived its close.
 */
export async function expectNothingLeft(h: Pick<Harness, 'watch' | 'get'>, ms = 10_000): Promise<void> {
  const left = await waitGone(() => h.watch.leftovers(), ms);
  const st = (await h.get('/status')) as { jobs?: number; sandbox?: { open?: number; survived_close?: number } | null };
  const said = `server: jobs ${st.jobs}, sandboxes open ${st.sandbox?.open}, closes that left processes ${st.sandbox?.survived_close}`;
  expect(
    left.map((p) => `${p.pid} [${stateOf(p.pid)}] ${p.cmd.slice(0, 120)}`),
    `processes of our sandboxes still alive (${said})`,
  ).toEqual([]);
  expect({ jobs: st.jobs, open: st.sandbox?.open ?? 0, survived_close: st.sandbox?.survived_close ?? 0 }, said).toEqual({
    jobs: 0,
    open: 0,
    survived_close: 0,
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Bytes used under a directory (du, same filesystem). */
export function duBytes(dir: string): number {
  const r = spawnSync('du', ['-sxb', dir], { encoding: 'utf8' });
  return Number(r.stdout.split('\t')[0]) || 0;
}

// ---------------------------------------------------------------------------------------------
// Scripted model
// ---------------------------------------------------------------------------------------------

/** One turn of a script: fixed text, or computed from the prompt so far (earlier observations). */
export type Step = string | ((ctx: PolicyContext) => string);

export const bash = (command: string, timeout?: number): string => call('execute_bash', timeout ? { command, timeout } : { command });
export const py = (code: string): string => call('execute_ipython_cell', { code });
export const create = (p: string, fileText: string): string =>
  call('str_replace_editor', { command: 'create', path: p, file_text: fileText });
export const finish = (message = 'done'): string => call('finish', { message });

/** The tool observations of a result, in order. */
export function observations(result: any): string[] {
  return ((result?.messages ?? []) as Array<{ role: string; content: string }>).filter((m) => m.role === 'tool').map((m) => m.content);
}

/** Parses every `RTJSON {...}` line the attack printed into one merged object. */
export function attackReport(result: any): Record<string, any> {
  const out: Record<string, any> = {};
  for (const o of observations(result)) {
    for (const m of o.matchAll(/^RTJSON (\{.*\})\s*$/gm)) {
      try {
        Object.assign(out, JSON.parse(m[1]!));
      } catch {
        /* cut by the output cap */
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Server + backend
// ---------------------------------------------------------------------------------------------

export interface JobAnswer {
  status: number;
  text: string;
  body: any;
  ms: number;
}

export interface Harness {
  url: string;
  server: RolloutServer;
  sim: SimHandle;
  secrets: Secrets;
  sandboxRoot: string;
  /** Bytes under the sandbox root once the runtime prepared (tool server installed), before any attack. */
  rootBaseline: number;
  watch: ProcWatch;
  /** Registers a script and returns the marker to put into the task text. */
  script(name: string, steps: Step[]): string;
  /** POST /process with the token, time-boxed: past `timeoutMs` the job is cancelled and the answer is what came back. */
  process(body: Record<string, unknown>, timeoutMs?: number): Promise<JobAnswer>;
  /** Latency of GET /health in ms (Infinity when it does not answer within 5 s). */
  health(): Promise<number>;
  /** Authenticated GET. */
  get(route: string): Promise<any>;
  close(): Promise<void>;
}

/** The HTTP side of a harness: /process time-boxed (cancelled past its time), /health, authenticated GET. */
export function jobClient(url: string, token: string, name: string): Pick<Harness, 'process' | 'health' | 'get'> {
  const auth = { authorization: `Bearer ${token}` };
  let seq = 0;
  return {
    async process(body, timeoutMs = 90_000) {
      const t0 = Date.now();
      const jobId = (body.job_id as string | undefined) ?? `rt-${name}-${++seq}-${hex(3)}`;
      try {
        const res = await fetch(`${url}/process`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...auth },
          body: JSON.stringify({ sampling_params: { seed: 1, enable_thinking: false }, ...body, job_id: jobId }),
          signal: AbortSignal.timeout(timeoutMs),
        });
        const text = await res.text();
        let parsed: unknown = null;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        if (process.env.RT_DEBUG) console.log(`[${jobId}] ${res.status} ${Date.now() - t0} ms ${summary(parsed)}`);
        return { status: res.status, text, body: parsed, ms: Date.now() - t0 };
      } catch (err) {
        // The server did not answer in time: cancel the job so it does not run on, and report a hang.
        await fetch(`${url}/cancel`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...auth },
          body: JSON.stringify({ job_id: jobId }),
        }).catch(() => undefined);
        return { status: 0, text: `no answer within ${timeoutMs} ms: ${(err as Error).message}`, body: null, ms: Date.now() - t0 };
      }
    },
    async health() {
      const t0 = performance.now();
      try {
        const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
        await r.text();
        return performance.now() - t0;
      } catch {
        return Infinity;
      }
    },
    async get(route) {
      const r = await fetch(`${url}${route}`, { headers: auth, signal: AbortSignal.timeout(10_000) });
      return r.json();
    },
  };
}

/** Handler settings that keep attacks short: every tool call and every grading step is time-boxed. */
export const FAST_HANDLERS = {
  code: { bash_timeout_s: 20, python_timeout_s: 20, no_change_timeout_s: 15, test_concurrency: 2, max_iterations: 12 },
  swe: { bash_timeout_s: 20, python_timeout_s: 20, no_change_timeout_s: 15, test_timeout_s: 20, max_iterations: 12 },
  math: { python_timeout_s: 20 },
};

/** A sandbox root the sandbox user can reach (as root: under /var/tmp). */
export function sandboxRootFor(name: string): string {
  return `${IS_ROOT ? '/var/tmp' : fs.realpathSync(os.tmpdir())}/raas-rtsb-${name}-${process.pid}`;
}

/**
 * Plants secrets, starts the simulated backend with a script policy and an in-process rollout server
 * (token required, bwrap runtime, its own sandbox root), and starts the process watch.
 */
export async function startHarness(
  name: string,
  opts: {
    sandbox?: Record<string, unknown>;
    server?: ServerConfigInput;
    handlers?: AgentHandler<any>[];
    secrets?: Secrets;
    /** Options of the simulated backend (e.g. `request_log` to read what it was sent). */
    sim?: SimOptions;
  } = {},
): Promise<Harness> {
  const secrets = opts.secrets ?? plantSecrets(name);
  const scripts: Record<string, Step[]> = {};
  const sim = await startSim({ seed: 1, ...opts.sim }, { policies: [scriptPolicy(scripts)] });
  const sandboxRoot = sandboxRootFor(name);
  const server = await startRolloutServer(
    {
      port: 0,
      log_level: 'silent',
      token: secrets.token,
      timeout_s: 120,
      ...opts.server,
      handlers: { ...FAST_HANDLERS, ...(opts.server?.handlers ?? {}) },
      sandbox: { runtime: 'bwrap', root: sandboxRoot, close_grace_ms: 300, ...opts.sandbox },
      llm: { backends: [{ address: sim.url }], retries: 0, ...(opts.server?.llm ?? {}) },
    },
    { handlers: opts.handlers },
  );
  const watch = new ProcWatch(process.pid, [secrets.procMark]);
  const h: Harness = {
    ...jobClient(server.url, secrets.token, name),
    url: server.url,
    server,
    sim,
    secrets,
    sandboxRoot,
    rootBaseline: 0,
    watch,
    script(n, steps) {
      scripts[n] = steps;
      return `SCRIPT:${n}`;
    },
    async close() {
      watch.stop();
      await server.close().catch(() => undefined);
      await sim.close().catch(() => undefined);
      fs.rmSync(sandboxRoot, { recursive: true, force: true });
      // Secrets the caller passed in are the caller's to remove.
      if (!opts.secrets) removeSecrets(secrets);
    },
  };
  // One honest job first: the runtime prepares (installs the tool server under the root) and the
  // sandbox root's size is taken as the baseline the attacks are measured against.
  const warm = await h.process(
    {
      instance: codeTask(
        h.script(`${name}-warmup`, [create('/workspace/solution.py', 'a, b = map(int, input().split())\nprint(a + b)\n'), finish()]),
      ),
    },
    60_000,
  );
  if (warm.status !== 200 || warm.body?.reward !== 1) {
    await h.close();
    throw new Error(`the harness's warm-up job failed (the server cannot run jobs): ${warm.text.slice(0, 1000)}`);
  }
  h.rootBaseline = duBytes(sandboxRoot);
  return h;
}

// ---------------------------------------------------------------------------------------------
// Task instances
// ---------------------------------------------------------------------------------------------

/** A code task whose hidden test expects `expected` (default: the sum of two numbers). */
export function codeTask(marker: string, expected?: { input: string; output: string }): Record<string, unknown> {
  return {
    data_source: 'code',
    instance_id: marker.replace('SCRIPT:', ''),
    problem: `${marker} Read two integers from stdin and print their sum.`,
    tests: [expected ?? { input: '2 3\n', output: '5\n' }],
    time_limit_s: 5,
  };
}

/** A two-file repository whose test fails until calc.add adds (files map, no tarball). */
export const CALC_REPO = {
  'calc.py': 'def add(a, b):\n    return a - b\n',
  'test_calc.py':
    'import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_add_neg(self):\n        self.assertEqual(add(-2, -3), -5)\n',
};

/** A swe task over CALC_REPO (two FAIL_TO_PASS tests, so a failing run is retried test by test). */
export function sweTask(marker: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    data_source: 'swe',
    instance_id: marker.replace('SCRIPT:', ''),
    problem_statement: `${marker} calc.add subtracts instead of adding.`,
    files: CALC_REPO,
    FAIL_TO_PASS: ['test_calc.T.test_add', 'test_calc.T.test_add_neg'],
    PASS_TO_PASS: [],
    ...extra,
  };
}

/** Asserts a job answered (200) in time; returns its result. */
export function answered(a: JobAnswer): any {
  expect(a.status, `the job did not answer properly (${a.ms} ms): ${a.text.slice(0, 600)}`).toBe(200);
  return a.body;
}

/** A short summary of a result for assertion messages. */
export function summary(r: any): string {
  if (!r) return 'no result';
  const obs = observations(r).map((o) => o.slice(0, 300));
  return JSON.stringify({
    reward: r.reward,
    critical_error: r.critical_error,
    error: r.error,
    finish_reason: r.finish_reason,
    details: r.details,
    git_patch: typeof r.git_patch === 'string' ? r.git_patch.slice(0, 400) : r.git_patch,
    obs,
  }).slice(0, 3000);
}
