import { RaasError } from '../../../protocol/errors.js';
import type { SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox, SandboxSpec } from '../../sandbox/types.js';
import type { StageContext } from '../types.js';
import { GIT_FN, git, script } from './git.js';
import { snapshotBaseCommit, type RepoSnapshot } from './source.js';
import { readCheckedFile } from './tarball.js';

/** Name of the base64 tarball written into a workspace before it is unpacked (then removed). */
const TARBALL_FILE = '.raas-repo.tar.b64';

/**
 * An instance's repository as the host holds it before a sandbox opens: its files map, its tarball
 * (read from the real path /process checked against sandbox.data_dirs), or the base commit of a
 * SWE-bench row taken from the operator's repos_dir / images_dir (snapshotBaseCommit).
 */
export type RepoMaterial =
  | { kind: 'files'; files: Record<string, string> }
  | { kind: 'tarball'; bytes: Buffer; gzip: boolean }
  | RepoSnapshot;

/** Reads or fetches the repository of the stage's instance (INIT and EVAL each take their own copy). */
export async function repoMaterial(ctx: StageContext<SweInstance>): Promise<RepoMaterial> {
  const inst = ctx.job.instance;
  if (inst.files) return { kind: 'files', files: inst.files };
  if (inst.tarball !== undefined) {
    return {
      kind: 'tarball',
      bytes: await readCheckedFile(inst.tarball, 'instance.tarball', undefined, ctx.signal),
      gzip: /\.(tgz|tar\.gz)$/.test(inst.tarball),
    };
  }
  return snapshotBaseCommit(ctx);
}

/**
 * The sandbox spec that materialises a repository: its files, or the bytes of a tarball or
 * snapshot passed in base64 and unpacked inside, so the files belong to the sandbox user.
 */
export function repoSpec(m: RepoMaterial, extra: Partial<SandboxSpec> = {}, extraFiles: Record<string, string> = {}): SandboxSpec {
  if (m.kind === 'files') return { network: false, ...extra, files: { ...m.files, ...extraFiles } };
  return { network: false, ...extra, files: { [TARBALL_FILE]: m.bytes.toString('base64'), ...extraFiles } };
}

/**
 * Sets the repository up in the workspace and answers its base commit. A files map or tarball:
 * unpacked, `git init` and one base commit, with bytecode caches excluded so running the tests
 * leaves the diff clean. A snapshot: its git directory unpacked as `.git` and the base commit
 * checked out, so HEAD is the row's own base_commit (as in SWE-bench's /testbed, minus history).
 */
export async function initRepo(sb: Sandbox, m: RepoMaterial, signal: AbortSignal): Promise<string> {
  const exclude = ['mkdir -p .git/info', "printf '__pycache__/\\n*.pyc\\n.raas-*\\n' >> .git/info/exclude"];
  const steps =
    m.kind === 'snapshot'
      ? ['mkdir .git', `base64 -d ${TARBALL_FILE} | tar -xzf - -C .git && rm -f ${TARBALL_FILE}`, ...exclude, 'g reset -q --hard']
      : [
          m.kind === 'tarball' ? `base64 -d ${TARBALL_FILE} | tar -x${m.gzip ? 'z' : ''}f - && rm -f ${TARBALL_FILE}` : ':',
          'g init -q .',
          ...exclude,
          'g add -A',
          'g commit -q --allow-empty --no-verify -m base',
        ];
  const r = await script(sb, ['set -e', GIT_FN, ...steps, 'g rev-parse HEAD'].join('\n'), [], { signal });
  const sha = r.stdout.trim();
  if (r.exit_code !== 0 || !/^[0-9a-f]{40,64}$/.test(sha) || (m.kind === 'snapshot' && sha !== m.commit)) {
    throw new RaasError(
      'sandbox_error',
      `swe: could not set up the repository (exit ${r.exit_code ?? r.signal}): ${(r.stderr || r.stdout).slice(-2000)}`,
    );
  }
  return sha;
}

/**
 * The model's changes since `base` as a binary patch (new files included), from fresh git
 * processes in the agent's sandbox: the patch is git's stdout, captured by the tool server, so no
 * file the agent could swap is read. A patch over `maxBytes` throws `sandbox_limit`.
 */
export async function capturePatch(sb: Sandbox, base: string, maxBytes: number, signal: AbortSignal): Promise<string> {
  const add = await git(sb, ['add', '-A'], { signal });
  if (add.exit_code !== 0)
    throw new RaasError('sandbox_error', `swe: git add failed (exit ${add.exit_code ?? add.signal}): ${add.stderr.slice(-2000)}`);
  const diff = await git(sb, ['diff', '--cached', '--binary', '--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', base, '--'], {
    signal,
    maxOutputBytes: maxBytes,
  });
  if (diff.truncated) {
    throw new RaasError(
      'sandbox_limit',
      `swe: the model's patch is over ${maxBytes} bytes (handlers.swe.max_patch_bytes); raise it or keep patches smaller`,
      { retryable: false },
    );
  }
  if (diff.exit_code !== 0)
    throw new RaasError('sandbox_error', `swe: git diff failed (exit ${diff.exit_code ?? diff.signal}): ${diff.stderr.slice(-2000)}`);
  return diff.stdout;
}
