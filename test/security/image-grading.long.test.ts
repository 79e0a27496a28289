// Red team against SWE-bench grading in an instance's own image. SWE-bench's images install the
// repository in development mode (`pip install -e .`), which puts the repository on sys.path
// through a .pth file before `site` imports `sitecustomize`: a patch that adds sitecustomize.py at
// the repository's root then runs in every Python process of the grader, before pytest. On the host
// (no editable install) the same file is never imported. The image here is the Debian image
// (python3, pytest, git inside; test/helpers/images.ts) with /testbed holding a small repository
// and that .pth file, and without Debian's own sitecustomize (a conda python has none); grading is the swe handler's own (evaluatePatch: a fresh image-rooted
// sandbox, the test command once, SWE-bench's pytest log parser, tamper canaries).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluatePatch, sweHandler } from '../../src/server/handlers/swe/index.js';
import { debianImage } from '../helpers/images.js';
import { bwrapRuntime, parseInstance, stageContext } from '../handlers/helpers.js';
import { hex } from './helpers.js';

const rt = bwrapRuntime('rt-image-grading');
let tmp: string;
let imagesDir: string;
let baseCommit: string;
let repo: string;

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=raas', '-c', 'user.email=raas@localhost', ...args], { cwd, encoding: 'utf8' }).trim();

const instance = {
  data_source: 'swe',
  instance_id: 'rt__calc-1',
  repo: 'rt/calc',
  problem_statement: 'calc.add subtracts instead of adding.',
  test_command: 'python3 -m pytest -rA',
  FAIL_TO_PASS: ['test_calc.py::test_add'],
  PASS_TO_PASS: ['test_calc.py::test_sub'],
};

/** A patch (git diff) against the image's repository, made by editing a scratch clone of it. */
function patchOf(edit: (dir: string) => void): string {
  const scratch = path.join(tmp, `scratch-${hex(3)}`);
  git(tmp, 'clone', '-q', repo, scratch);
  edit(scratch);
  git(scratch, 'add', '-A');
  return execFileSync('git', ['diff', '--cached', baseCommit], { cwd: scratch, encoding: 'utf8' });
}

async function grade(patch: string) {
  const inst = await parseInstance<any>(sweHandler.instance, { ...instance, base_commit: baseCommit });
  const ctx = stageContext(inst, rt, { images_dir: imagesDir });
  try {
    return await evaluatePatch(ctx, patch, { testTimeoutS: 300 });
  } finally {
    await ctx.closeAll();
  }
}

beforeAll(async () => {
  tmp = fs.mkdtempSync('/var/tmp/raas-rt-imggrade-');
  imagesDir = path.join(tmp, 'images');
  fs.mkdirSync(imagesDir);
  const dir = path.join(imagesDir, 'sweb.eval.x86_64.rt_s_calc-1');
  // Hard links: nothing of the cached Debian image is copied, and nothing of it is changed (only new files are added).
  execFileSync('cp', ['-al', await debianImage(), dir]);
  repo = path.join(dir, 'testbed');
  fs.rmSync(repo, { recursive: true, force: true });
  fs.mkdirSync(repo);
  fs.writeFileSync(path.join(repo, 'calc.py'), 'def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n');
  fs.writeFileSync(
    path.join(repo, 'test_calc.py'),
    'from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n',
  );
  git(repo, 'init', '-q', '-b', 'main');
  git(repo, 'add', '-A');
  git(repo, 'commit', '-q', '-m', 'base');
  baseCommit = git(repo, 'rev-parse', 'HEAD');
  git(repo, 'commit', '-q', '--allow-empty', '-m', 'SWE-bench');
  // Debian's python has a sitecustomize of its own in the standard library, found before any other;
  // a conda python (SWE-bench's images) has none. Unlinked here (the cached image keeps its file).
  fs.rmSync(path.join(dir, 'usr/lib/python3.11/sitecustomize.py'), { force: true });
  // What `pip install -e .` leaves in the environment: a .pth putting the repository on sys.path.
  const site = path.join(dir, 'usr/local/lib/python3.11/dist-packages');
  fs.mkdirSync(site, { recursive: true });
  fs.writeFileSync(path.join(site, '__editable__.rt_calc-0.1.pth'), '/testbed\n');
  execFileSync('chmod', ['-R', 'a+rX', tmp]);
}, 900_000);

afterAll(async () => {
  await rt.dispose();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, 300_000);

describe('SWE-bench grading in an image with an editable install', { timeout: 600_000 }, () => {
  it('controls: the fix resolves the instance, an empty patch does not', async () => {
    const fix = await grade(
      patchOf((d) => fs.writeFileSync(path.join(d, 'calc.py'), 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n')),
    );
    expect(fix.resolved, JSON.stringify(fix.details).slice(0, 2000)).toBe(true);
    const empty = await grade('');
    expect(empty.resolved).toBe(false);
  });

  it('a sitecustomize.py that prints a passing log and exits before pytest runs: not resolved', async () => {
    const forged = patchOf((d) =>
      fs.writeFileSync(
        path.join(d, 'sitecustomize.py'),
        [
          'import os, sys',
          "if 'pytest' in ' '.join(sys.orig_argv):",
          "    print('PASSED test_calc.py::test_add')",
          "    print('PASSED test_calc.py::test_sub')",
          "    print('============================== 2 passed in 0.01s ==============================')",
          '    sys.stdout.flush()',
          '    os._exit(0)',
          '',
        ].join('\n'),
      ),
    );
    const r = await grade(forged);
    console.info(`[observed] forged log via sitecustomize: ${JSON.stringify({ resolved: r.resolved, details: r.details }).slice(0, 600)}`);
    expect(r.resolved).toBe(false);
  });

  // DEFECT (the documented limit "forging aimed at named tests", reached from a file outside every
  // test and every module under test): a patch adding sitecustomize.py at the repository's root
  // runs inside the grader's pytest whenever the image installs the repository in development mode,
  // as SWE-bench's images do (without an editable install the file is never imported). One that
  // rewrites pytest's report of the named FAIL_TO_PASS test alone is graded resolved with calc.add
  // still wrong: the canaries and PASS_TO_PASS stay as expected. Removing sitecustomize.py from
  // patches would not close it: the module under test can make the same rewrite when imported.
  it.fails("a sitecustomize.py that rewrites pytest's report of the named FAIL_TO_PASS test only: not resolved", async () => {
    const forged = patchOf((d) =>
      fs.writeFileSync(
        path.join(d, 'sitecustomize.py'),
        [
          'import sys',
          "if 'pytest' in ' '.join(sys.orig_argv):",
          '    from _pytest import reports',
          '    _orig = reports.TestReport.from_item_and_call.__func__',
          '    def _forged(cls, item, call):',
          '        r = _orig(cls, item, call)',
          "        if item.nodeid.endswith('::test_add'):",
          "            r.outcome, r.longrepr = 'passed', None",
          '        return r',
          '    reports.TestReport.from_item_and_call = classmethod(_forged)',
          '',
        ].join('\n'),
      ),
    );
    const r = await grade(forged);
    console.info(
      `[observed] targeted rewrite via sitecustomize: ${JSON.stringify({ resolved: r.resolved, details: r.details }).slice(0, 600)}`,
    );
    expect(r.resolved).toBe(false);
  });
});
