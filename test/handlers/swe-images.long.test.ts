// A SWE-bench row graded as SWE-bench grades it, in its own image's environment: python-xmltodict's
// Debian 12 security patch (a real upstream fix, test/handlers/fixtures/debian-patch.ts) in an image
// built at test time with mmdebstrap (python3 and pytest from Debian inside the image; the
// sandbox has nothing of the host's userland), found per instance under handlers.swe.images_dir by
// ProRL's name (sweb.eval.x86_64.<id> with `__` → `_s_`) or by a configured template, as a
// directory and as a tag of an OCI layout. The image's repository is committed as SWE-bench's
// images are (base_commit, then the set-up commit on top) and holds a later commit the model must
// not see.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluatePatch, sweHandler } from '../../src/server/handlers/swe/index.js';
import { capturePatch } from '../../src/server/handlers/swe/repo.js';
import { debianImage, ociOf } from '../helpers/images.js';
import { debianPatchFixture, type DebianFixture } from './fixtures/debian-patch.js';
import { bwrapRuntime, parseInstance, stageContext } from './helpers.js';

let tmp: string;
let fx: DebianFixture;
let imagesDir: string;
let instance: Record<string, unknown>;
/** The commit after base_commit in the image (the gold fix): in the image's history, never in the agent's. */
let futureCommit: string;
let setupCommit: string;
const rt = bwrapRuntime('swe-images');

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=raas', '-c', 'user.email=raas@localhost', ...args], { cwd, encoding: 'utf8' }).trim();

/**
 * The instance's image: the Debian image (hard-linked, so nothing of it is copied here) plus
 * /testbed holding the repository as SWE-bench's images hold it: base_commit, a later commit on a
 * branch (the fix), then HEAD = base_commit plus the set-up commit.
 */
function instanceImageDir(base: string, name: string): string {
  const dir = path.join(imagesDir, name);
  execFileSync('cp', ['-al', base, dir]);
  const testbed = path.join(dir, 'testbed');
  fs.rmSync(testbed, { recursive: true, force: true });
  git(tmp, 'clone', '-q', fx.repoDir, testbed);
  git(testbed, 'checkout', '-q', '-b', 'future');
  execFileSync('git', ['apply', '-'], { cwd: testbed, input: fx.goldPatch });
  git(testbed, 'commit', '-q', '-am', 'the upstream fix');
  futureCommit = git(testbed, 'rev-parse', 'HEAD');
  git(testbed, 'checkout', '-q', 'main');
  git(testbed, 'commit', '-q', '--allow-empty', '-m', 'SWE-bench');
  setupCommit = git(testbed, 'rev-parse', 'HEAD');
  git(testbed, 'remote', 'remove', 'origin');
  return dir;
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(process.getuid?.() === 0 ? '/var/tmp' : '/tmp', 'raas-swe-images-'));
  fx = await debianPatchFixture(tmp);
  imagesDir = path.join(tmp, 'images');
  fs.mkdirSync(imagesDir);
  instance = { ...fx.instance, instance_id: 'debian__python-xmltodict-0001' };
  instanceImageDir(await debianImage(), 'sweb.eval.x86_64.debian_s_python-xmltodict-0001');
  execFileSync('chmod', ['-R', 'a+rX', tmp]);
}, 900_000);

afterAll(async () => {
  await rt.dispose();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, 300_000);

const cfg = (): Record<string, unknown> => ({ images_dir: imagesDir });

async function grade(patch: string, config = cfg()) {
  const inst = await parseInstance<any>(sweHandler.instance, instance);
  const ctx = stageContext(inst, rt, config);
  try {
    return await evaluatePatch(ctx, patch, { testTimeoutS: 300 });
  } finally {
    await ctx.closeAll();
  }
}

/** The gold patch as the model would hand it in: applied in the agent's sandbox, captured with git diff. */
async function agentPatch(): Promise<{ patch: string; log: string; ls: string }> {
  const inst = await parseInstance<any>(sweHandler.instance, instance);
  const ctx = stageContext(inst, rt, cfg());
  try {
    const init = await sweHandler.init(ctx);
    const sb = init.runtime!;
    expect(sb.workspace).toBe('/testbed');
    expect(init.metadata).toMatchObject({ base_commit: setupCommit });
    const log = (await sb.exec(['sh', '-c', `git log --all --format=%H; git cat-file -t ${futureCommit} 2>&1; true`])).stdout;
    const ls = (
      await sb.exec(['sh', '-c', 'ls /workspace/xmltodict.py; command -v python3; command -v pytest; ls /usr/bin/node 2>&1; true'])
    ).stdout;
    await sb.writeFiles({ '.raas-gold.patch': fx.goldPatch });
    const applied = await sb.exec(['git', 'apply', '.raas-gold.patch']);
    expect(applied.exit_code, applied.stderr).toBe(0);
    await sb.exec(['rm', '.raas-gold.patch']);
    const patch = await capturePatch(sb, String(init.metadata!.base_commit), 1 << 20, ctx.signal);
    return { patch, log, ls };
  } finally {
    await ctx.closeAll();
  }
}

describe("a SWE-bench row in its own image (mmdebstrap: Debian's python3 and pytest inside)", { timeout: 600_000 }, () => {
  it("INIT roots the agent's sandbox in the image: the repository at /testbed at its HEAD alone, the image's programs", async () => {
    const { patch, log, ls } = await agentPatch();
    // Only HEAD (the set-up commit) is in the agent's repository: the fix's commit is not.
    expect(log.split('\n')[0]).toBe(setupCommit);
    expect(log).not.toContain(futureCommit);
    expect(log).toMatch(/could not get object info|bad file|Not a valid object name/);
    expect(ls, ls).toMatch(/^\/workspace\/xmltodict.py\n\/usr\/bin\/python3\n\/usr\/bin\/pytest\n.*No such file/);
    // The captured patch is the gold patch (a diff against the image's HEAD).
    expect(patch).toContain('xmltodict.py');
    const r = await grade(patch);
    expect(r.resolved, JSON.stringify(r.details).slice(0, 3000)).toBe(true);
  });

  it('the gold patch resolves it: every test PASSED in the log of one run, canaries as expected', async () => {
    const r = await grade(fx.goldPatch);
    expect(r.resolved, JSON.stringify(r.details).slice(0, 3000)).toBe(true);
    expect(r.filter_reason).toBeUndefined();
    expect(r.details).toMatchObject({
      grading: 'log',
      log_parser: 'pytest',
      resolution: 'RESOLVED_FULL',
      canaries: { expected: true, forged: false },
    });
    expect(Object.values(r.details.PASS_TO_PASS).every((s) => s === 'PASSED')).toBe(true);
    // pytest ran from the image: its rootdir is the image's /testbed.
    expect(String(r.details.test_log_tail)).toMatch(/passed/);
  });

  it('an empty patch does not', async () => {
    const r = await grade('');
    expect(r.resolved).toBe(false);
    expect(r.filter_reason).toBeUndefined();
  });

  it('the fix plus a change that breaks one PASS_TO_PASS test: unresolved, exactly that test FAILED', async () => {
    const file = path.join(fx.repoDir, 'xmltodict.py');
    execFileSync('git', ['apply', '-'], { cwd: fx.repoDir, input: fx.goldPatch });
    const src = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, src.replace("v = _unicode('false')", "v = _unicode('no')"));
    const patch = execFileSync('git', ['diff'], { cwd: fx.repoDir, encoding: 'utf8' });
    execFileSync('git', ['checkout', '-q', '--', '.'], { cwd: fx.repoDir });
    const r = await grade(patch);
    expect(r.resolved).toBe(false);
    expect(r.details.resolution).toBe('RESOLVED_NO');
    const failed = Object.entries(r.details.PASS_TO_PASS)
      .filter(([, s]) => s !== 'PASSED')
      .map(([t]) => t);
    expect(failed).toEqual(['tests/test_dicttoxml.py::DictToXMLTestCase::test_boolean_unparse']);
    expect(Object.values(r.details.FAIL_TO_PASS).every((s) => s === 'PASSED')).toBe(true);
  });

  it('an image whose repository does not contain base_commit: INIT fails naming both commits', async () => {
    const inst = await parseInstance<any>(sweHandler.instance, { ...instance, base_commit: 'a'.repeat(40) });
    const ctx = stageContext(inst, rt, cfg());
    try {
      await expect(sweHandler.init(ctx)).rejects.toMatchObject({
        code: 'invalid_instance',
        message: expect.stringMatching(new RegExp(`at ${setupCommit}, which does not contain the instance's base_commit a{40}`)),
      });
    } finally {
      await ctx.closeAll();
    }
  });

  it('no image for the row: the error names every path tried and the way out', async () => {
    const inst = await parseInstance<any>(sweHandler.instance, { ...instance, instance_id: 'other__repo-1' });
    const ctx = stageContext(inst, rt, cfg());
    await expect(sweHandler.init(ctx)).rejects.toMatchObject({
      code: 'invalid_instance',
      message: expect.stringMatching(/no image for instance "other__repo-1".*sweb\.eval\.x86_64\.other_s_repo-1\.sif.*image_root: false/),
    });
  });

  it('found by a configured template as a tag of an OCI layout, and graded the same', async () => {
    // One layout for many instances, as `skopeo copy docker://swebench/<image> oci:<layout>:<tag>`
    // makes it: the Debian layers shared, the instance's /testbed a layer of its own on top. OCI
    // tags cannot hold "__" (umoci's reference grammar): SWE-bench's remote names fit.
    const base = await ociOf('debian', await debianImage());
    const dir = path.join(imagesDir, 'verified.oci');
    execFileSync('cp', ['-al', base, dir]);
    const layer = path.join(tmp, 'testbed-layer.tar');
    execFileSync('tar', [
      '-C',
      path.join(imagesDir, 'sweb.eval.x86_64.debian_s_python-xmltodict-0001'),
      '--numeric-owner',
      '-cf',
      layer,
      'testbed',
    ]);
    const tag = 'sweb.eval.x86_64.debian_1776_python-xmltodict-0001';
    execFileSync('umoci', ['raw', 'add-layer', '--image', `${dir}:latest`, '--tag', tag, layer]);
    const r = await grade(fx.goldPatch, { images_dir: imagesDir, image_names: ['verified.oci:sweb.eval.x86_64.{swebench_id}'] });
    expect(r.resolved, JSON.stringify(r.details).slice(0, 3000)).toBe(true);
  });
});
