// SWE-bench grading of an instance nobody here wrote: python-xmltodict's Debian 12 security patch
// (0001, "Prevent XML injection", upstream commit 6592b0e), its code before the patch as the
// repository, the patch's fix as the gold patch and its tests as test_patch, FAIL_TO_PASS /
// PASS_TO_PASS computed by running them (test/handlers/fixtures/debian-patch.ts). Graded by the
// swe handler's EVAL in bwrap sandboxes, the tests run by the host's Debian python3 and pytest.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluatePatch, sweHandler } from '../../src/server/handlers/swe/index.js';
import { bwrapRuntime, parseInstance, stageContext } from './helpers.js';
import { debianPatchFixture, splitPatch, type DebianFixture } from './fixtures/debian-patch.js';

let tmp: string;
let fx: DebianFixture;
const rt = bwrapRuntime('debian');

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(process.getuid?.() === 0 ? '/var/tmp' : os.tmpdir(), 'raas-grading-debian-'));
  fx = await debianPatchFixture(tmp);
  execFileSync('chmod', ['-R', 'a+rX', tmp]);
}, 180_000);

afterAll(async () => {
  await rt.dispose();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

async function grade(patch: string) {
  const inst = await parseInstance<any>(sweHandler.instance, fx.instance);
  const ctx = stageContext(inst, rt, { repos_dir: fx.reposDir });
  try {
    return await evaluatePatch(ctx, patch, { testTimeoutS: 120 });
  } finally {
    await ctx.closeAll();
  }
}

describe('a real upstream fix from a Debian source package, graded as SWE-bench grades it', { timeout: 180_000 }, () => {
  it("the instance: the fix's new tests fail before it and pass after; the others pass throughout", () => {
    const i = fx.instance as { FAIL_TO_PASS: string[]; PASS_TO_PASS: string[]; test_patch: string };
    expect([...i.FAIL_TO_PASS].sort()).toEqual([
      'tests/test_dicttoxml.py::DictToXMLTestCase::test_rejects_attribute_name_with_angle_brackets',
      'tests/test_dicttoxml.py::DictToXMLTestCase::test_rejects_malicious_xmlns_prefix',
      'tests/test_dicttoxml.py::DictToXMLTestCase::test_rejects_tag_name_with_angle_brackets',
    ]);
    expect(i.PASS_TO_PASS.length).toBeGreaterThan(20);
    expect(i.PASS_TO_PASS).toContain('tests/test_dicttoxml.py::DictToXMLTestCase::test_attribute_values_with_angle_brackets_are_escaped');
    expect(splitPatch(i.test_patch).map((p) => p.file)).toEqual(['tests/test_dicttoxml.py']);
    expect(splitPatch(fx.goldPatch).map((p) => p.file)).toEqual(['xmltodict.py']);
  });

  it('the gold patch resolves it: every test PASSED in the log, canaries as expected, nothing filtered', async () => {
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
  });

  it('an empty patch does not', async () => {
    const r = await grade('');
    expect(r.resolved).toBe(false);
    expect(r.filter_reason).toBeUndefined();
  });

  it('the fix plus a change that breaks one PASS_TO_PASS test: unresolved, exactly that test FAILED', async () => {
    // unparse() writes False as "false" (xmltodict.py of 0.13.0); only test_boolean_unparse unparses a bool.
    const file = path.join(fx.repoDir, 'xmltodict.py');
    execFileSync('git', ['apply', '-'], { cwd: fx.repoDir, input: fx.goldPatch });
    const src = fs.readFileSync(file, 'utf8');
    expect(src).toContain("v = _unicode('false')");
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
});
