// Red team against `raas serve` as a real process (node dist/src/cli.js serve), run twice: as root
// (the default here and on clusters) and as an unprivileged user (nobody), where the sandbox runs
// as the same uid as the server. The server's secrets are really its own here: an environment
// variable in its initial environment (what /proc/<pid>/environ shows), files owned by its user,
// its API token in a config file only it can read. The attacks are the ones most likely to reach
// a server process: reads through planted symlinks, the swe patch swap, procfs, the API port,
// processes that outlive the job, client-named host files.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { scriptPolicy } from '../agent/script-policy.js';
import { PY_SNOOP, pyConnect, pyPatchSwapper } from './attacks.js';
import {
  FAST_HANDLERS,
  IS_ROOT,
  ProcWatch,
  ROOT,
  answered,
  attackReport,
  bash,
  codeTask,
  create,
  expectNoLeak,
  expectPlantedUnchanged,
  finish,
  jobClient,
  plantSecrets,
  removeSecrets,
  snapshotPlanted,
  summary,
  sweTask,
  waitGone,
  type Harness,
  type Secrets,
  type Step,
} from './helpers.js';

const CLI = path.join(ROOT, 'dist/src/cli.js');
const START_TIMEOUT_MS = 60_000;

/** A `raas serve` child process with its own secrets. */
interface Served extends Pick<Harness, 'process' | 'health'> {
  url: string;
  child: ChildProcess;
  secrets: Secrets;
  watch: ProcWatch;
  before: Map<string, string>;
  close(): Promise<void>;
}

/** uid/gid of a user, from `id`. */
function idOf(user: string): { uid: number; gid: number } | undefined {
  try {
    const passwd = fs
      .readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${user}:`));
    if (!passwd) return undefined;
    const [, , uid, gid] = passwd.split(':');
    return { uid: Number(uid), gid: Number(gid) };
  } catch {
    return undefined;
  }
}

function chownTree(p: string, uid: number, gid: number): void {
  fs.lchownSync(p, uid, gid);
  if (fs.lstatSync(p).isDirectory()) for (const e of fs.readdirSync(p)) chownTree(path.join(p, e), uid, gid);
}

/**
 * Starts `raas serve` as `user` (undefined: as ourselves) with a config file holding the token, the
 * secret env var in its initial environment, and the simulated backend of `scripts`.
 */
async function serve(label: string, user: { uid: number; gid: number } | undefined, sim: SimHandle): Promise<Served> {
  const secrets = plantSecrets(`cli${label}`);
  const dir = `/var/tmp/raas-rtcli-${label}-${process.pid}`;
  fs.rmSync(dir, { recursive: true, force: true });
  // 0755: the sandbox user must reach the tool server installed under the sandbox root inside it.
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const config = {
    token: secrets.token,
    log_level: 'warn',
    timeout_s: 120,
    handlers: FAST_HANDLERS,
    sandbox: { runtime: 'bwrap', root: path.join(dir, 'sb'), close_grace_ms: 300 },
    llm: { retries: 0 },
  };
  const cfg = path.join(dir, 'server.yaml');
  fs.writeFileSync(cfg, JSON.stringify(config, null, 1), { mode: 0o600 });
  // The server's files are its user's: the config (with the token) and the planted secrets it could read.
  if (user) {
    chownTree(dir, user.uid, user.gid);
    for (const d of [secrets.varTmpDir, secrets.tmpDir]) chownTree(d, user.uid, user.gid);
  }
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dir,
    LANG: 'C.UTF-8',
    [secrets.envName]: secrets.envValue,
  };
  const child = spawn(process.execPath, [CLI, 'serve', '--config', cfg, '--port', '0', '--llm', sim.url], {
    cwd: dir,
    env,
    uid: user?.uid,
    gid: user?.gid,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (c: Buffer): void => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+?)[\s)]/.exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, sig) =>
      reject(new Error(`raas serve (${label}) exited (${code ?? sig}) before listening: ${out.slice(-2000)}`)),
    );
    setTimeout(
      () => reject(new Error(`raas serve (${label}) did not listen within ${START_TIMEOUT_MS} ms: ${out.slice(-2000)}`)),
      START_TIMEOUT_MS,
    ).unref();
  }).catch((err: unknown) => {
    child.kill('SIGKILL');
    removeSecrets(secrets);
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  const watch = new ProcWatch(child.pid!, [secrets.procMark]);
  return {
    ...jobClient(url, secrets.token, `cli${label}`),
    url,
    child,
    secrets,
    watch,
    before: snapshotPlanted(secrets),
    async close() {
      watch.stop();
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      removeSecrets(secrets);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

const scripts: Record<string, Step[]> = {};
let sim: SimHandle;
beforeAll(async () => {
  sim = await startSim({ seed: 1 }, { policies: [scriptPolicy(scripts)] });
}, 60_000);
afterAll(async () => {
  await sim?.close();
});

function script(name: string, steps: Step[]): string {
  scripts[name] = steps;
  return `SCRIPT:${name}`;
}

const nobody = idOf('nobody');
/**
 * Why `nobody` cannot run this checkout's server, if it cannot: a clone under a 0700 home folder
 * (Debian 12's default) is unreadable to other users, and the server runs from the clone's dist/.
 */
function unreadableTo(who: { uid: number; gid: number } | undefined): string | undefined {
  if (!who || !IS_ROOT) return undefined;
  const r = spawnSync(
    'setpriv',
    [
      `--reuid=${who.uid}`,
      `--regid=${who.gid}`,
      '--clear-groups',
      '--',
      process.execPath,
      '-e',
      `require('fs').accessSync(${JSON.stringify(CLI)}, require('fs').constants.R_OK); require('fs').accessSync(${JSON.stringify(path.join(ROOT, 'node_modules/fastify/package.json'))}, require('fs').constants.R_OK)`,
    ],
    { encoding: 'utf8' },
  );
  return r.status === 0
    ? undefined
    : `the checkout (${ROOT}) is not readable by nobody (a folder on its path is 0700?); clone it under a world-readable folder such as /opt to run this variant`;
}
const variants: Array<{ label: string; user: () => { uid: number; gid: number } | undefined; skip?: string }> = [
  { label: 'root', user: () => undefined, skip: IS_ROOT ? undefined : 'the tests do not run as root' },
  {
    label: 'nobody',
    user: () => nobody,
    skip: !IS_ROOT ? 'starting a server as another user needs root' : !nobody ? 'no user "nobody" on this machine' : unreadableTo(nobody),
  },
];

for (const v of variants) {
  describe.skipIf(v.skip !== undefined)(`raas serve as ${v.label}${v.skip ? ` (skipped: ${v.skip})` : ''}`, { timeout: 120_000 }, () => {
    let srv: Served;
    let s: Secrets;
    beforeAll(async () => {
      srv = await serve(v.label, v.user(), sim);
      s = srv.secrets;
    }, 120_000);
    afterAll(async () => {
      await srv?.close();
    });
    const run = async (instance: Record<string, unknown>, timeoutMs = 90_000): Promise<any> => {
      const a = await srv.process({ instance }, timeoutMs);
      expectNoLeak(a.text, s);
      return answered(a);
    };

    describe.concurrent('attacks', () => {
      it('code: solution.py symlinked to a passing program only the server user can read: reward 0, no leak', async () => {
        const m = script(`cli-${v.label}-link`, [bash(`ln -sf ${s.files.tmpOraclePy} /workspace/solution.py; ls -l /workspace`), finish()]);
        const r = await run(codeTask(m, { input: '', output: `${s.oracle}\n` }));
        expect(r.reward, summary(r)).toBe(0);
      });

      it("swe: the patch capture swapped for /proc/self/environ (the server's real environment) leaks nothing", async () => {
        const m = script(`cli-${v.label}-toctou`, [
          bash("sed -i 's/a - b/a + b/' calc.py"),
          create('/workspace/.swap.py', pyPatchSwapper([s.files.tmpSecret, s.files.varTmpSecret])),
          bash(`(setsid nohup python3 .swap.py ${s.procMark} >/dev/null 2>&1 &); ln -s /proc/self/environ env_link; sleep 1`),
          finish(),
        ]);
        await run(sweTask(m));
      });

      it("procfs snooping finds neither the server's environment nor its token", async () => {
        const m = script(`cli-${v.label}-snoop`, [
          create('/workspace/attack.py', PY_SNOOP),
          bash('python3 /workspace/attack.py'),
          finish(),
        ]);
        const r = await run(codeTask(m));
        const rep = attackReport(r);
        expect(rep.snoop, summary(r)).toBeDefined();
        expect(
          (rep.snoop.visible as Array<[number, string]>).filter(([, c]) => c.includes('cli.js')),
          'the server process is visible',
        ).toEqual([]);
      });

      it("the server's API port and the LLM backend are unreachable from a sandbox", async () => {
        const targets = [`127.0.0.1:${new URL(srv.url).port}`, `127.0.0.1:${new URL(sim.url).port}`];
        const m = script(`cli-${v.label}-net`, [
          create('/workspace/attack.py', pyConnect(targets, 1)),
          bash('python3 /workspace/attack.py'),
          finish(),
        ]);
        const r = await run(codeTask(m));
        const rep = attackReport(r);
        expect(rep.net, summary(r)).toBeDefined();
        expect(Object.entries(rep.net.tcp as Record<string, string>).filter(([, x]) => x.startsWith('CONNECTED'))).toEqual([]);
      });

      it('processes started with setsid, nohup and a double fork are gone once the job answered', async () => {
        const mark = `${s.procMark}esc`;
        const m = script(`cli-${v.label}-escape`, [
          bash(
            `setsid bash -c 'exec -a ${mark}-a sleep 300' & nohup bash -c 'trap "" HUP TERM; exec -a ${mark}-b sleep 300' >/dev/null 2>&1 & ( ( exec -a ${mark}-c sleep 300 & ) & ); sleep 0.3; echo started`,
          ),
          finish(),
        ]);
        await run(codeTask(m));
        const left = await waitGone(() => srv.watch.leftovers(), 8000);
        expect(
          left.map((p) => `${p.pid} ${p.cmd}`),
          'processes of the sandbox alive after its job answered',
        ).toEqual([]);
      });

      it.each([
        ['/proc/self/environ', () => '/proc/self/environ'],
        ['a tarball only the server user can read, outside the data dirs', () => s.files.varTmpTar],
      ])('instance.tarball %s: 400 invalid_instance', async (_n, target) => {
        const a = await srv.process(
          { instance: { data_source: 'swe', problem_statement: 'x', tarball: target(), FAIL_TO_PASS: ['t'] } },
          15_000,
        );
        expectNoLeak(a.text, s);
        expect(a.status, a.text.slice(0, 400)).toBe(400);
        expect(a.body?.error?.code).toBe('invalid_instance');
      });
    });

    describe('afterwards', () => {
      it('planted files unchanged, no process of ours left, /health fast', async () => {
        expectPlantedUnchanged(srv.before, s);
        const left = await waitGone(() => srv.watch.leftovers(), 10_000);
        expect(left.map((p) => `${p.pid} ${p.cmd.slice(0, 120)}`)).toEqual([]);
        expect(await srv.health()).toBeLessThan(1000);
      });

      it('SIGKILL of the server mid-job: every sandbox process dies with it (--die-with-parent), escaped ones included', async () => {
        const mark = `${s.procMark}kill`;
        const m = script(`cli-${v.label}-orphans`, [
          bash(
            `setsid bash -c 'exec -a ${mark}-a sleep 300' & ( ( exec -a ${mark}-b sleep 300 & ) & ); nohup bash -c 'trap "" HUP TERM; exec -a ${mark}-c sleep 300' >/dev/null 2>&1 & sleep 60`,
            90,
          ),
          finish(),
        ]);
        const pending = srv.process({ instance: codeTask(m) }, 30_000).catch(() => undefined);
        const started = await waitGone(() => (srv.watch.leftovers().filter((p) => p.cmd.includes(mark)).length >= 3 ? [] : [0]), 20_000);
        expect(started, 'the escapes never started').toEqual([]);
        srv.watch.sample();
        srv.child.kill('SIGKILL');
        const left = await waitGone(() => srv.watch.leftovers(), 5000);
        expect(
          left.map((p) => `${p.pid} ${p.cmd.slice(0, 120)}`),
          'sandbox processes alive 5 s after their server was SIGKILLed',
        ).toEqual([]);
        await pending;
      });
    });
  });
}
