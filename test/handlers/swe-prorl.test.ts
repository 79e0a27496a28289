import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerConfig } from '../../src/protocol/config-server.js';
import { taskOf } from '../../src/protocol/tasks.js';
import { HandlerRegistry } from '../../src/server/handlers/registry.js';
import { evaluatePatch, sweHandler } from '../../src/server/handlers/swe/index.js';
import { resetPlan } from '../../src/server/handlers/swe/protect.js';
import { sweImageNames } from '../../src/server/handlers/swe/source.js';
import { djangoTestLabel, specTestCommand } from '../../src/server/handlers/swe/specs.js';
import { gradingPlan } from '../../src/server/handlers/swe/plan.js';
import { admit } from '../../src/server/pipeline/intake.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { createSandboxRuntime } from '../../src/server/sandbox/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { call, scriptPolicy } from '../agent/script-policy.js';
import { bwrapRuntime, parseInstance, stageContext } from './helpers.js';
import { CALC, F2P, P2P, git, makeUpstream } from './calc-repo.js';

// SWE-bench rows in the shape NeMo-Gym's prorl_agent sends them to ProRL Agent Server: the HF row
// verbatim (GYM responses_api_agents/prorl_agent/app.py@b785ff0:329), no data_source (ProRL:
// swebench, openhands/nvidia/async_server_process.py@40c1d8a:774), FAIL_TO_PASS / PASS_TO_PASS as
// JSON strings (GYM responses_api_agents/swe_agents/tests/test_app.py@07d6b0d:816-817), no files.
// The repository comes from the operator's handlers.swe.repos_dir / images_dir, here a real git
// repository made at test time. Real rollout server (bwrap), real simulated backend, real git.

const sh = git;

const edit = (newBody: string) =>
  call('str_replace_editor', {
    command: 'str_replace',
    path: '/workspace/calc/__init__.py',
    old_str: 'def add(a, b):\n    return a - b\n',
    new_str: `def add(a, b):\n    ${newBody}\n`,
  });
// What the model can see of the repository: its history, and whether the operator's mirror is reachable.
const LOOK = call('execute_bash', {
  command: 'git log --all --format=%H; git rev-parse HEAD; ls /raas-src 2>&1 | head -1; git status --short | wc -l',
});

describe('SWE-bench rows in ProRL shape: repository from repos_dir / images_dir (rollout server + simulated backend + bwrap)', () => {
  // Made in beforeAll: a describe body also runs when a filter skips every test (and afterAll then does not).
  let tmp: string;
  let repos: string;
  let images: string;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-swe-prorl-${process.pid}`;
  let up: ReturnType<typeof makeUpstream>;
  let sim: SimHandle;
  let srv: RolloutServer;

  async function post(body: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${srv.url}/process`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
  /** A Hugging Face SWE-bench row as Gym forwards it (its keys, strings where SWE-bench has strings). */
  const row = (repo: string, instanceId: string, script: string, extra: Record<string, unknown> = {}) => ({
    repo,
    instance_id: instanceId,
    base_commit: up.base,
    problem_statement: `add(2, 3) returns -1 instead of 5. SCRIPT:${script}`,
    hints_text: '',
    created_at: '2024-01-01T00:00:00Z',
    version: '1.0',
    environment_setup_commit: up.base,
    patch: up.goldPatch,
    test_patch: up.testPatch,
    FAIL_TO_PASS: JSON.stringify([F2P]),
    PASS_TO_PASS: JSON.stringify([P2P]),
    ...extra,
  });
  // Gym's only sampling params: temperature, top_p, max_output_tokens (prorl_agent/app.py@b785ff0:331-339).
  const gym = (instance: Record<string, unknown>) => ({ instance, sampling_params: { temperature: 1.0, top_p: 1.0 } });

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-swe-prorl-'));
    repos = path.join(tmp, 'repos');
    images = path.join(tmp, 'images');
    fs.chmodSync(tmp, 0o755); // the sandbox user reads the mirrors
    const work = path.join(tmp, 'upstream');
    up = makeUpstream(work);
    fs.mkdirSync(path.join(repos, 'acme'), { recursive: true });
    sh(tmp, 'clone', '-q', '--mirror', work, path.join(repos, 'acme__calc.git'));
    sh(tmp, 'clone', '-q', '--mirror', work, path.join(repos, 'acme', 'nested.git'));
    sh(work, 'bundle', 'create', '-q', path.join(repos, 'acme__bundled.bundle'), '--all');
    // An unpacked SWE-bench image: the repository at /testbed, checked out at the base commit.
    const testbed = path.join(images, 'sweb.eval.x86_64.acme_s_widget-7', 'testbed');
    sh(tmp, 'clone', '-q', work, testbed);
    sh(testbed, 'reset', '-q', '--hard', up.base);
    fs.writeFileSync(path.join(images, 'sweb.eval.x86_64.acme_s_absent-1.sif'), 'not really a SIF');
    execFileSync('chmod', ['-R', 'a+rX', tmp]);

    sim = await startSim(
      { seed: 1 },
      {
        policies: [
          scriptPolicy({ fix: [LOOK, edit('return a + b'), call('finish', {})], wrong: [edit('return abs(a - b)'), call('finish', {})] }),
        ],
      },
    );
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      sandbox: { runtime: 'bwrap', root },
      // No pytest in the sandbox's /usr/bin/python3 (the derived command for an unknown repository
      // is SWE-bench's `pytest -rA`), so the fixture's tests are unittest ones and this key is used.
      // image_root false: the images here hold a repository only, the sandboxes stay host-rooted.
      handlers: { swe: { repos_dir: repos, images_dir: images, image_root: false, test_command: 'python3 -m unittest' } },
    });
    const add = await fetch(`${srv.url}/add_llm_server`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ address: sim.url, api: 'vllm' }),
    });
    expect(add.status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('a fix from a bare mirror scores 1; the model sees only the base commit, never the mirror; git_patch applies to the upstream base commit', async () => {
    const r = await post(gym(row('acme/calc', 'acme__calc-1', 'fix')));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body, r.body.error ?? '').toMatchObject({
      critical_error: null,
      reward: 1,
      resolved: true,
      instance_id: 'acme__calc-1',
      data_source: 'swe',
    });
    expect(r.body.details).toMatchObject({ applied: true, FAIL_TO_PASS: { [F2P]: 'PASSED' }, PASS_TO_PASS: { [P2P]: 'PASSED' } });
    expect(r.body.git_patch).toBe(up.goldPatch);
    // The first tool answer: one commit (the base, by its upstream id), HEAD there, no /raas-src, a clean tree.
    const look = r.body.messages.find((m: any) => m.role === 'tool').content as string;
    const lines = look.split('\n');
    expect(lines.slice(0, 2)).toEqual([up.base, up.base]);
    expect(look).not.toContain(up.fix);
    expect(lines[2]).toMatch(/No such file or directory/);
    expect(lines[3]).toBe('0');
    // The prompt says how tests run: handlers.swe.test_command.
    expect(r.body.messages[1].content).toContain('Tests run with: python3 -m unittest');
    // What Gym does with it (prorl_agent/app.py@b785ff0:380-405): reward from resolved, the patch applies upstream.
    const check = path.join(tmp, 'check-mirror');
    sh(tmp, 'clone', '-q', path.join(repos, 'acme__calc.git'), check);
    sh(check, 'checkout', '-q', up.base);
    fs.writeFileSync(path.join(tmp, 'model.patch'), r.body.git_patch);
    expect(() => sh(check, 'apply', '--check', path.join(tmp, 'model.patch'))).not.toThrow();
  }, 90_000);

  it('a wrong fix scores 0: FAIL_TO_PASS fails, PASS_TO_PASS still passes', async () => {
    const r = await post(gym(row('acme/calc', 'acme__calc-1', 'wrong')));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body, r.body.error ?? '').toMatchObject({ critical_error: null, reward: 0, resolved: false });
    expect(r.body.details).toMatchObject({ applied: true, FAIL_TO_PASS: { [F2P]: 'FAILED' }, PASS_TO_PASS: { [P2P]: 'PASSED' } });
  }, 90_000);

  it('the other layouts: <owner>/<name>.git, <owner>__<name>.bundle, an unpacked image named as SWE-bench names it', async () => {
    const cases: Array<[string, string]> = [
      ['acme/nested', 'acme__nested-2'],
      ['acme/bundled', 'acme__bundled-3'],
      ['acme/widget', 'acme__widget-7'],
    ];
    const results = await Promise.all(cases.map(([repo, id]) => post(gym(row(repo, id, 'fix')))));
    for (const [k, r] of results.entries()) {
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body, `${cases[k]![0]}: ${r.body.error}`).toMatchObject({
        critical_error: null,
        reward: 1,
        resolved: true,
        git_patch: up.goldPatch,
      });
    }
  }, 150_000);

  it('nothing provides the repository: 200 with critical_error "init", the error naming every path tried', async () => {
    const r = await post(gym(row('acme/absent', 'acme__absent-1', 'fix')));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // ProRL: init failures are results, not HTTP errors (openhands/nvidia/utils.py@40c1d8a:397-422).
    expect(r.body).toMatchObject({ critical_error: 'init', reward: 0, resolved: false, git_patch: null, messages: [] });
    const err = r.body.error as string;
    for (const p of [
      path.join(repos, 'acme__absent.git'),
      path.join(repos, 'acme', 'absent.git'),
      path.join(repos, 'acme__absent.bundle'),
      path.join(images, 'sweb.eval.x86_64.acme_s_absent-1'),
      path.join(images, 'sweb.eval.x86_64.acme_1776_absent-1'),
    ]) {
      expect(err).toContain(p);
    }
    expect(err).toContain('acme/absent');
    expect(err).toContain(`apptainer build --sandbox ${path.join(images, 'sweb.eval.x86_64.acme_s_absent-1')}`);
    expect(err).toContain(`git clone --mirror https://github.com/acme/absent.git ${path.join(repos, 'acme__absent.git')}`);
  }, 60_000);

  it('a mirror without the base commit: 200 with critical_error "init" naming the mirror and the commit', async () => {
    const missing = 'f'.repeat(40);
    const r = await post(gym(row('acme/calc', 'acme__calc-9', 'fix', { base_commit: missing })));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ critical_error: 'init', reward: 0 });
    expect(r.body.error).toContain(`${path.join(repos, 'acme__calc.git')}: has no commit ${missing}`);
  }, 60_000);

  it('an instance test_command wins over handlers.swe.test_command', async () => {
    const r = await post(gym(row('acme/calc', 'acme__calc-1', 'wrong', { test_command: 'python3 -m unittest -v' })));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.messages[1].content).toContain('Tests run with: python3 -m unittest -v');
  }, 90_000);
});

describe('data sources and instance shapes ProRL accepts', () => {
  const registry = new HandlerRegistry();

  it('maps ProRL data sources onto the handlers, with its deepcoder prefix rule', () => {
    // openhands/nvidia/__init__.py@40c1d8a:5-10: swebench, deepscaler, deepcoder; codecontests, apps, codeforces, taco → deepcoder.
    // openhands/nvidia/registry.py@40c1d8a:133,142: name[:9] == 'deepcoder' → deepcoder.
    const expected: Record<string, string> = {
      swebench: 'swe',
      deepscaler: 'math',
      deepcoder: 'code',
      codecontests: 'code',
      apps: 'code',
      codeforces: 'code',
      taco: 'code',
      deepcoder_lcb: 'code',
      'deepcoder-v2': 'code',
    };
    for (const [ds, handler] of Object.entries(expected)) {
      expect(registry.resolve(ds)?.name, ds).toBe(handler);
      expect(taskOf(ds), ds).toBe(handler);
    }
    // Case-sensitive as in ProRL; names nothing matches stay unknown (raas answers 400, ProRL 500).
    for (const ds of ['Deepcoder', 'deepcode', 'swegym', 'toString', 'constructor', '__proto__'])
      expect(registry.resolve(ds), ds).toBeUndefined();
    expect(taskOf('constructor')).toBeUndefined();
  });

  it('admits codecontests / deepcoder* rows to the code handler and answers 400 unknown_data_source otherwise', async () => {
    const code = {
      prompt: [{ role: 'user', content: 'Print 1.' }],
      reward_model: { ground_truth: JSON.stringify([{ input: '', output: '1\n' }]) },
    };
    for (const ds of ['codecontests', 'deepcoder_lcb']) {
      const a = await admit({ instance: { data_source: ds, ...code }, sampling_params: {} }, registry);
      expect(a.handler.name, ds).toBe('code');
    }
    await expect(admit({ instance: { data_source: 'nope', ...code }, sampling_params: {} }, registry)).rejects.toMatchObject({
      code: 'unknown_data_source',
      status: 400,
    });
  });

  it('validates a SWE-bench row: repo and base_commit name host paths, so only plain names pass', async () => {
    const ok = await parseInstance<any>(sweHandler.instance, {
      repo: 'django/django',
      base_commit: 'a'.repeat(40),
      problem_statement: 'x',
      FAIL_TO_PASS: '["t"]',
      PASS_TO_PASS: '[]',
      version: 3.0,
    });
    expect(ok.FAIL_TO_PASS).toEqual(['t']);
    expect(ok.test_command).toBeUndefined();
    for (const [bad, field] of [
      [{ repo: '../etc/x', base_commit: 'a'.repeat(40) }, 'repo'],
      [{ repo: 'a/b/c', base_commit: 'a'.repeat(40) }, 'repo'],
      [{ repo: 'a/..', base_commit: 'a'.repeat(40) }, 'repo'],
      [{ repo: 'a/b', base_commit: 'HEAD' }, 'base_commit'],
      [{ repo: 'a/b' }, 'base_commit'],
      [{}, 'files'],
    ] as const) {
      await expect(
        parseInstance(sweHandler.instance, { problem_statement: 'x', FAIL_TO_PASS: ['t'], ...bad }),
        JSON.stringify(bad),
      ).rejects.toThrow(new RegExp(`"${field}"`));
    }
  });

  it('derives the test command as SWE-bench does for the repository; overrides win', () => {
    // swebench/harness/constants/python.py@726c546: lines 5, 9, 11-14, 178, 603-605.
    expect(specTestCommand('django/django', '4.0')).toBe('./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1');
    expect(specTestCommand('django/django', '1.9')).toBe('./tests/runtests.py --verbosity 2');
    expect(specTestCommand('astropy/astropy', '1.3')).toBe('pytest -rA -vv -o console_output_style=classic --tb=no');
    expect(specTestCommand('astropy/astropy', '5.0')).toBe('pytest -rA');
    expect(specTestCommand('sympy/sympy', '1.12')).toMatch(/bin\/test -C --verbose$/);
    expect(specTestCommand('sphinx-doc/sphinx', 5.0)).toBe('tox --current-env -epy39 -v --');
    const swe = { problem_statement: 'x', FAIL_TO_PASS: ['t'], PASS_TO_PASS: [] } as any;
    expect(gradingPlan({ ...swe, repo: 'someone/else', base_commit: 'a'.repeat(40) }, {}).command).toBe('pytest -rA');
    const django = gradingPlan(
      {
        ...swe,
        repo: 'django/django',
        base_commit: 'a'.repeat(40),
        FAIL_TO_PASS: ['test_foo (admin_views.tests.AdminTest)', 'test_bar (m.C.test_bar)', 'Docstring-only id'],
      },
      {},
    );
    expect(django.args).toEqual(['admin_views.tests.AdminTest.test_foo', 'm.C.test_bar', 'Docstring-only id']);
    expect(djangoTestLabel('test_x (a.b.C)\nLong description')).toBe('a.b.C.test_x');
    expect(gradingPlan({ ...swe, repo: 'psf/requests', base_commit: 'a'.repeat(40) }, { test_command: 'python -m pytest' }).command).toBe(
      'python -m pytest',
    );
    expect(
      gradingPlan({ ...swe, repo: 'psf/requests', base_commit: 'a'.repeat(40), test_command: 'tox' }, { test_command: 'python -m pytest' })
        .command,
    ).toBe('tox');
    expect(gradingPlan({ ...swe, files: { 'a.py': '' } }, {}).command).toBe('python3 -m unittest -v');
  });

  it('names images as ProRL and SWE-bench do', () => {
    // ProRL: openhands/nvidia/swe_agent/utils.py@40c1d8a:76-102; SWE-bench: test_spec.py@726c546:107-110.
    expect(sweImageNames('django__django-11099')).toEqual([
      'sweb.eval.x86_64.django_s_django-11099',
      'sweb.eval.x86_64.django_1776_django-11099',
    ]);
    expect(sweImageNames('Org__Repo-1')).toEqual(['sweb.eval.x86_64.org_s_repo-1', 'sweb.eval.x86_64.org_1776_repo-1']);
    for (const bad of ['../x', 'a/b', '', 7, undefined]) expect(sweImageNames(bad)).toEqual([]);
  });

  it('checks handlers.swe in the server config: host paths must be absolute', () => {
    const bad = ServerConfig.safeParse({ handlers: { swe: { repos_dir: 'repos' } } });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toContain('handlers.swe.repos_dir must be an absolute path');
    const good = ServerConfig.parse({ handlers: { swe: { repos_dir: '/srv/repos', max_iterations: 50 }, code: { test_concurrency: 2 } } });
    expect(good.handlers.swe).toEqual({ repos_dir: '/srv/repos', max_iterations: 50 });
  });
});

describe('grading: what a patch adds beside a test module is not imported instead of it (bwrap)', () => {
  let rt: ReturnType<typeof bwrapRuntime>;
  let tmp: string;
  beforeAll(() => {
    rt = bwrapRuntime('swe-shadow');
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-swe-shadow-'));
  });
  afterAll(async () => {
    await rt?.dispose();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });
  const files = {
    'calc.py': 'def add(a, b):\n    return a - b\n',
    'test_calc.py':
      'import unittest\n\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n',
  };
  const fake = 'import unittest\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        pass\n';

  /** The diff (binary) from `files` to `files` plus what `change` writes, made by git on the host. */
  function patchOf(change: (dir: string) => void): string {
    const dir = fs.mkdtempSync(path.join(tmp, 'p-'));
    for (const [rel, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, rel), text);
    sh(dir, 'init', '-q', '.');
    sh(dir, 'add', '-A');
    sh(dir, 'commit', '-q', '-m', 'base');
    change(dir);
    sh(dir, 'add', '-A', '-f');
    return execFileSync('git', ['diff', '--cached', '--binary'], { cwd: dir, encoding: 'utf8' });
  }

  it('plans to remove a package directory named like a test module and files beside it under its name', () => {
    const inst = { FAIL_TO_PASS: ['test_calc.T.test_add'], PASS_TO_PASS: ['pkg/test_p.py::test_b'] } as any;
    const plan = resetPlan(
      inst,
      [],
      ['calc.py', 'test_calc.py', 'pkg/test_p.py'],
      [
        'calc.py',
        'test_calc/__init__.py',
        'test_calc.cpython-311-x86_64-linux-gnu.so',
        'test_calc.py',
        'pkg/test_p.abi3.so',
        'test_calcx.so',
        'other.so',
      ],
    );
    expect(plan.remove).toEqual([
      'conftest.py',
      'pkg/conftest.py',
      'pkg/test_p',
      'pkg/test_p.abi3.so',
      'pkg/test_p.py',
      'test_calc',
      'test_calc.cpython-311-x86_64-linux-gnu.so',
      'test_calc.py',
    ]);
    expect(plan.restore).toEqual(['pkg/test_p.py', 'test_calc.py']);
  });

  it('an unchecked hash-based .pyc of a test module in the patch is never read: reward 0', async () => {
    // Compiled by the sandbox's python (/usr/bin/python3), so its cache tag and magic number match.
    const patch = patchOf((dir) => {
      fs.writeFileSync(path.join(tmp, 'fake.py'), fake);
      fs.mkdirSync(path.join(dir, '__pycache__'));
      const tag = execFileSync('/usr/bin/python3', ['-c', 'import sys; print(sys.implementation.cache_tag)'], { encoding: 'utf8' }).trim();
      execFileSync('/usr/bin/python3', [
        '-c',
        `import py_compile; py_compile.compile(${JSON.stringify(path.join(tmp, 'fake.py'))}, cfile=${JSON.stringify(path.join(dir, '__pycache__', `test_calc.${tag}.pyc`))}, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)`,
      ]);
    });
    expect(patch).toContain('__pycache__/test_calc.');
    const inst = await parseInstance<any>(sweHandler.instance, {
      problem_statement: 'add is wrong',
      files,
      FAIL_TO_PASS: ['test_calc.T.test_add'],
    });
    const ctx = stageContext(inst, rt);
    try {
      const r = await evaluatePatch(ctx, patch, { testTimeoutS: 60 });
      expect(r.details, String(r.details.apply_error)).toMatchObject({ applied: true, FAIL_TO_PASS: { 'test_calc.T.test_add': 'FAILED' } });
      expect(r.resolved).toBe(false);
    } finally {
      await ctx.closeAll();
    }
  }, 60_000);
});

describe('the unisolated process runtime reads the sources in place', () => {
  let tmp: string;
  let rt: ReturnType<typeof createSandboxRuntime>;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-swe-proc-'));
    rt = createSandboxRuntime({ runtime: 'process', root: path.join(tmp, 'root') });
  });
  afterAll(async () => {
    await rt?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('INIT checks out the base commit from a bundle, HEAD is the upstream base commit', async () => {
    const up = makeUpstream(path.join(tmp, 'upstream'));
    fs.mkdirSync(path.join(tmp, 'repos'));
    sh(tmp, '-C', path.join(tmp, 'upstream'), 'bundle', 'create', '-q', path.join(tmp, 'repos', 'acme__calc.bundle'), '--all');
    const inst = await parseInstance<any>(sweHandler.instance, {
      repo: 'acme/calc',
      base_commit: up.base.slice(0, 12),
      problem_statement: 'x',
      FAIL_TO_PASS: '["t"]',
    });
    const ctx = stageContext(inst, rt, { repos_dir: path.join(tmp, 'repos') });
    try {
      const init = await sweHandler.init(ctx);
      expect(init.metadata).toMatchObject({ base_commit: up.base, repo_source: path.join(tmp, 'repos', 'acme__calc.bundle') });
      const log = await init.runtime!.exec(['git', 'log', '--all', '--format=%H']);
      expect(log.stdout.trim()).toBe(up.base);
      expect((await init.runtime!.readFile('calc/__init__.py')).toString()).toBe(CALC);
    } finally {
      await ctx.closeAll();
    }
  }, 60_000);
});
