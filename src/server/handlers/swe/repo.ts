import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import type { SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox, SandboxSpec } from '../../sandbox/types.js';

/** Name of the base64 tarball written into a workspace before it is unpacked (then removed). */
const TARBALL_FILE = '.raas-repo.tar.b64';
const GIT = 'git -c user.name=raas -c user.email=raas@localhost -c init.defaultBranch=main -c advice.detachedHead=false';

/**
 * The sandbox spec that materialises an instance's repository: its files map, or its tarball
 * (read on the host, passed in base64 and unpacked inside, so the files belong to the sandbox user).
 */
export async function repoSpec(inst: SweInstance, signal: AbortSignal, extra: Record<string, string> = {}): Promise<SandboxSpec> {
  if (inst.files) return { files: { ...inst.files, ...extra }, network: false };
  const tarball = inst.tarball!;
  let bytes: Buffer;
  try {
    bytes = await readFile(tarball, { signal });
  } catch (err) {
    throw new RaasError('invalid_instance', `instance.tarball: cannot read ${tarball}: ${(err as Error).message}`, { cause: err, retryable: false });
  }
  return { files: { [TARBALL_FILE]: bytes.toString('base64'), ...extra }, network: false };
}

/**
 * Unpacks the tarball (when there is one), then `git init` and a base commit, with bytecode caches
 * excluded so running the tests leaves the diff clean. Throws with the shell output on failure.
 */
export async function initRepo(sb: Sandbox, inst: SweInstance, signal: AbortSignal): Promise<void> {
  const unpack = inst.files ? '' : `base64 -d ${TARBALL_FILE} | tar -x${/\.(tgz|tar\.gz)$/.test(inst.tarball ?? '') ? 'z' : ''}f - && rm -f ${TARBALL_FILE} && `;
  const cmd = `${unpack}${GIT} init -q . && mkdir -p .git/info && printf '__pycache__/\\n*.pyc\\n.raas-*\\n' >> .git/info/exclude && ${GIT} add -A && ${GIT} commit -q --allow-empty -m base && echo RAAS_REPO_OK`;
  const r = await sb.bash(cmd, { timeout_s: 120, signal });
  if (!r.output.includes('RAAS_REPO_OK')) throw new RaasError('sandbox_error', `swe: could not set up the repository: ${r.output.slice(-2000)}`);
}

/** The model's changes as a patch (new files included), read on the host so bytes stay exact. */
export async function capturePatch(sb: Sandbox, signal: AbortSignal): Promise<string> {
  const out = '.git/raas.patch';
  const r = await sb.bash(`${GIT} add -A && ${GIT} diff --cached --no-color --binary HEAD > ${out}; echo "exit=$?"`, { timeout_s: 120, signal });
  if (!/exit=0/.test(r.output)) throw new RaasError('sandbox_error', `swe: git diff failed: ${r.output.slice(-2000)}`);
  try {
    return await readFile(path.join(sb.workspace, out), { encoding: 'utf8', signal });
  } catch {
    return (await sb.bash(`cat ${out}`, { timeout_s: 60, signal })).output;
  }
}

export { GIT };
