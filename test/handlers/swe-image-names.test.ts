// Which image an instance's sandboxes are rooted in: the names ProRL and SWE-bench give SWE-bench
// images, an R2E-Gym row's docker_image, a configured template, and what happens when none exists.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SweInstance } from '../../src/protocol/tasks.js';
import { imageNames, instanceImage } from '../../src/server/handlers/swe/image.js';
import { sweHandler } from '../../src/server/handlers/swe/index.js';
import { parseInstance } from './helpers.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-image-names-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const row = (extra: Record<string, unknown>): SweInstance =>
  ({ problem_statement: 'x', FAIL_TO_PASS: ['t'], PASS_TO_PASS: [], ...extra }) as unknown as SweInstance;

describe('image names', () => {
  it("ProRL's (`__` → `_s_`) then SWE-bench's (`__` → `_1776_`), lowercased", () => {
    // ProRL: openhands/nvidia/swe_agent/utils.py@40c1d8a:94-97 (f"sweb.eval.x86_64.{instance_id}".replace("__", "_s_"), lowercased);
    // SWE-bench: swebench/harness/test_spec/test_spec.py@726c546:108-110 (lowercased id, then "__" → "_1776_").
    expect(imageNames(row({ instance_id: 'django__django-11099' }), {})).toEqual([
      'sweb.eval.x86_64.django_s_django-11099',
      'sweb.eval.x86_64.django_1776_django-11099',
    ]);
  });

  it("an R2E-Gym row's docker_image, as `apptainer pull` names its file", () => {
    // ProRL: get_instance_docker_image returns instance["docker_image"] for r2egym rows (utils.py@40c1d8a:80-82).
    expect(imageNames(row({ docker_image: 'namanjain12/aiohttp_final:f0d74880deec8fcd982bce639c93c5e130d41198' }), {})).toEqual([
      'namanjain12_aiohttp_final_f0d74880deec8fcd982bce639c93c5e130d41198',
    ]);
  });

  it('a configured template (string or list); ids that could name another path give no name', () => {
    expect(imageNames(row({ instance_id: 'a__b-1' }), { image_names: 'swe/{instance_id}' })).toEqual(['swe/a__b-1']);
    expect(imageNames(row({ instance_id: 'a__b-1' }), { image_names: ['{swebench_id}', 'oci:{prorl_id}'] })).toEqual([
      'a_1776_b-1',
      'oci:a_s_b-1',
    ]);
    expect(imageNames(row({ instance_id: '../x' }), {})).toEqual([]);
    expect(imageNames(row({ docker_image: '../../etc' }), {})).toEqual([]);
  });
});

describe('the image of an instance', () => {
  it('none without images_dir, with image_root false, or for a row that brings its files', () => {
    expect(instanceImage(row({ instance_id: 'a__b-1' }), {})).toBeUndefined();
    expect(instanceImage(row({ instance_id: 'a__b-1' }), { images_dir: tmp, image_root: false })).toBeUndefined();
    expect(instanceImage(row({ instance_id: 'a__b-1', files: { 'a.py': '' } }), { images_dir: tmp })).toBeUndefined();
  });

  it('the first name found in any form, with the workspace at /testbed unless configured', () => {
    fs.writeFileSync(path.join(tmp, 'sweb.eval.x86_64.a_1776_b-1.sif'), '');
    expect(instanceImage(row({ instance_id: 'a__b-1' }), { images_dir: tmp })).toEqual({
      ref: path.join(tmp, 'sweb.eval.x86_64.a_1776_b-1.sif'),
      workdir: '/testbed',
    });
    expect(instanceImage(row({ instance_id: 'a__b-1' }), { images_dir: tmp, image_workdir: '/repo' })?.workdir).toBe('/repo');
  });

  it("none found: an error naming every path tried, unless the row's repository can come from repos_dir", () => {
    const r = row({ instance_id: 'c__d-2', repo: 'c/d', base_commit: 'a'.repeat(40) });
    expect(() => instanceImage(r, { images_dir: tmp })).toThrow(/sweb\.eval\.x86_64\.c_s_d-2.*sweb\.eval\.x86_64\.c_1776_d-2\.tar/);
    expect(instanceImage(r, { images_dir: tmp, repos_dir: tmp })).toBeUndefined();
  });

  it('an R2E-Gym row needs no repo or base_commit when it names its image', async () => {
    const inst = await parseInstance<SweInstance>(sweHandler.instance, {
      data_source: 'swe',
      problem_statement: 'x',
      docker_image: 'namanjain12/aiohttp_final:abc',
      expected_output_json: '{"t": "PASSED"}',
    });
    expect(inst.docker_image).toBe('namanjain12/aiohttp_final:abc');
  });
});
