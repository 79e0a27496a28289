import { RaasError } from '../../../protocol/errors.js';
import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';
import { findImage } from '../../sandbox/index.js';
import type { Sandbox, SandboxSpec } from '../../sandbox/types.js';
import { GIT_FN, script } from './git.js';

/**
 * Where an instance's image is looked up: each template with `{prorl_id}` (the instance_id
 * lowercased with `__` → `_s_`, as ProRL names SWE-bench images,
 * openhands/nvidia/swe_agent/utils.py@40c1d8a:94), `{swebench_id}` (`__` → `_1776_`, SWE-bench's
 * remote names, swebench/harness/test_spec/test_spec.py@726c546:107-110), `{instance_id}` (as
 * given) and `{docker_image}` (an R2E-Gym row's image, ProRL utils.py@40c1d8a:80-82, with `/` and
 * `:` made `_`, as `apptainer pull` names its file). A template whose variable the row lacks is skipped.
 */
const DEFAULT_IMAGE_NAMES = ['sweb.eval.x86_64.{prorl_id}', 'sweb.eval.x86_64.{swebench_id}', '{docker_image}'];
/** Where SWE-bench's images keep the repository (and SWE-bench's eval script works). */
const DEFAULT_IMAGE_WORKDIR = '/testbed';

/** A plain name of an id, or undefined for one that could name a path elsewhere. */
function plain(v: unknown): string | undefined {
  return typeof v === 'string' && /^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/.test(v) ? v : undefined;
}

/** The names an instance's image may have under handlers.swe.images_dir, in the order they are tried. */
export function imageNames(inst: SweInstance, cfg: SweHandlerConfig): string[] {
  const id = plain(inst.instance_id);
  const docker =
    typeof inst.docker_image === 'string' && /^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,299}$/.test(inst.docker_image)
      ? inst.docker_image.replace(/[/:@]+/g, '_')
      : undefined;
  const vars: Record<string, string | undefined> = {
    instance_id: id,
    prorl_id: id?.replace(/__/g, '_s_').toLowerCase(),
    swebench_id: id?.replace(/__/g, '_1776_').toLowerCase(),
    docker_image: docker,
  };
  const templates =
    cfg.image_names === undefined ? DEFAULT_IMAGE_NAMES : typeof cfg.image_names === 'string' ? [cfg.image_names] : cfg.image_names;
  const out: string[] = [];
  for (const t of templates) {
    let missing = false;
    const name = t.replace(/\{(\w+)\}/g, (_, k: string) => vars[k] ?? ((missing = true), ''));
    if (!missing && name && !out.includes(name)) out.push(name);
  }
  return out;
}

/** The instance's own image: a host path under images_dir and the workspace inside it; undefined when the server roots no sandbox in an image. */
export interface InstanceImage {
  ref: string;
  workdir: string;
}

/**
 * The image an instance's sandboxes are rooted in, when handlers.swe.images_dir is set and
 * image_root is not turned off: the first name that exists there in any form (an unpacked root
 * directory, `<name>.sif`, `<name>_latest.sif`, `<name>.tar`, an OCI layout directory, or
 * `<layout>:<tag>` for a template that names one). Throws `invalid_instance` naming every path
 * tried when none exists (INIT: `critical_error: "init"`).
 */
export function instanceImage(inst: SweInstance, cfg: SweHandlerConfig): InstanceImage | undefined {
  // Rows that bring their repository (files, a tarball) never take an image's.
  if (!cfg.images_dir || cfg.image_root === false || inst.files !== undefined || inst.tarball !== undefined) return undefined;
  const names = imageNames(inst, cfg);
  const found = findImage(cfg.images_dir, names);
  if (found.ref) return { ref: found.ref, workdir: cfg.image_workdir ?? DEFAULT_IMAGE_WORKDIR };
  // A row without an image of its own keeps the repository-only path when it names one (repos_dir).
  if (cfg.repos_dir && inst.repo && inst.base_commit && inst.docker_image === undefined) return undefined;
  throw new RaasError(
    'invalid_instance',
    `swe: no image for instance ${JSON.stringify(inst.instance_id ?? inst.docker_image ?? null)} in handlers.swe.images_dir; looked for ${
      found.tried.join(', ') || `names from handlers.swe.image_names (${names.length} usable)`
    }; add it (an unpacked directory, a .sif, an OCI layout or a docker save archive), or set handlers.swe.image_root: false`,
    { retryable: false },
  );
}

/** The sandbox spec of a sandbox rooted in the instance's image. */
export function imageSpec(img: InstanceImage, extra: Partial<SandboxSpec> = {}): SandboxSpec {
  return { network: false, ...extra, rootImage: { ref: img.ref, workdir: img.workdir } };
}

/** Exit status of the setup script when the image's repository is not at the instance's base commit. */
const WRONG_COMMIT = 3;

/**
 * Prepares the repository an image holds at its workspace and answers the commit patches are taken
 * against: the image's HEAD, which must be the instance's base_commit or a descendant of it
 * (SWE-bench's images commit their set-up on top of base_commit, `git commit --allow-empty -am
 * SWE-bench`, swebench/harness/test_spec/python.py@726c546:309-315). With `hideHistory` the git
 * directory is replaced by one holding HEAD alone (a local `fetch --depth=1`, the index kept: same
 * tree), so no later commit (the fix among them) is in the model's reach, as with a snapshot from
 * repos_dir; images SWE-bench built lately prune them too (python.py@726c546:278-288), older ones
 * do not. Grading's sandboxes keep the image's history: no model works there.
 */
export async function initImageRepo(
  sb: Sandbox,
  baseCommit: string | undefined,
  hideHistory: boolean,
  signal: AbortSignal,
): Promise<string> {
  const r = await script(sb, IMAGE_REPO_SCRIPT, [baseCommit ?? '', hideHistory ? '1' : '0'], { timeout_s: 600, signal });
  const lines = r.stdout.trim().split('\n');
  const sha = lines[lines.length - 1] ?? '';
  if (r.exit_code === WRONG_COMMIT) {
    throw new RaasError('invalid_instance', `swe: ${r.stderr.trim().slice(-500)}; use the image built for this instance`, {
      retryable: false,
    });
  }
  if (r.exit_code === 127 || /cannot run bash|git: (command )?not found/.test(r.stderr)) {
    throw new RaasError(
      'invalid_instance',
      `swe: the image's sandbox has no bash or git (${r.stderr.trim().slice(-300)}): the swe handler runs both inside the image, as SWE-bench's images have them; set handlers.swe.image_root: false to take only the repository from the image`,
      { retryable: false },
    );
  }
  if (r.exit_code !== 0 || !/^[0-9a-f]{40,64}$/.test(sha)) {
    throw new RaasError(
      'sandbox_error',
      `swe: could not set up the repository of the image at ${sb.workspace} (exit ${r.exit_code ?? r.signal}): ${(r.stderr || r.stdout).slice(-2000)}`,
    );
  }
  return sha;
}

const IMAGE_REPO_SCRIPT = [
  'set -e',
  GIT_FN,
  'want=$1; hide=$2',
  'head=$(g rev-parse -q --verify "HEAD^{commit}") || { echo "the image has no git repository with a commit at $PWD" >&2; exit 1; }',
  'if [ -n "$want" ]; then',
  '  base=$(g rev-parse -q --verify "$want^{commit}" 2>/dev/null) || base=',
  '  if [ -z "$base" ] || ! g merge-base --is-ancestor "$base" "$head"; then',
  `    echo "the image's repository at $PWD is at $head, which does not contain the instance's base_commit $want" >&2; exit ${WRONG_COMMIT}`,
  '  fi',
  'fi',
  'if [ "$hide" = 1 ]; then',
  '  rm -rf .raas-snap',
  '  g init -q .raas-snap',
  `  g -C .raas-snap fetch -q --no-tags --depth=1 --upload-pack="git -c uploadpack.allowAnySHA1InWant=true upload-pack" "$PWD" "$head"`,
  '  mv .git/index .raas-snap/.git/index 2>/dev/null || true',
  '  rm -rf .git',
  '  mv .raas-snap/.git .git',
  '  rmdir .raas-snap',
  '  g update-ref refs/heads/main "$head"',
  '  g symbolic-ref HEAD refs/heads/main',
  '  rm -f .git/FETCH_HEAD .git/shallow.lock',
  'fi',
  'mkdir -p .git/info',
  "printf '__pycache__/\\n*.pyc\\n.raas-*\\n' >> .git/info/exclude",
  'g rev-parse HEAD',
].join('\n');
