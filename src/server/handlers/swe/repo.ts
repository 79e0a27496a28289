import { RaasError } from '../../../protocol/errors.js';
import type { SweInstance } from '../../../protocol/tasks.js';
import type { ExecOptions, ExecResult, Sandbox, SandboxSpec } from '../../sandbox/types.js';
import { readCheckedFile } from './tarball.js';

/** Name of the base64 tarball written into a workspace before it is unpacked (then removed). */
const TARBALL_FILE = '.raas-repo.tar.b64';

/**
 * git with our identity and with the hooks a repository can carry switched off: no hooks, no
 * fsmonitor, no external diff or textconv, no attributes file. Run through exec (a fresh process,
 * never the agent's shell), so shell functions or aliases named `git` do not apply.
 */
export const GIT = [
  'git',
  '-c', 'user.name=raas',
  '-c', 'user.email=raas@localhost',
  '-c', 'init.defaultBranch=main',
  '-c', 'advice.detachedHead=false',
  '-c', 'core.hooksPath=/dev/null',
  '-c', 'core.fsmonitor=false',
  '-c', 'core.attributesFile=/dev/null',
  '-c', 'core.pager=cat',
  '-c', 'diff.external=',
  '-c', 'gc.auto=0',
];

/**
 * Environment of every git and test process: no global or system git config (HOME is the
 * workspace, so a `.gitconfig` in a patch would otherwise be read), pathspecs taken literally.
 */
export const GIT_ENV: Record<string, string> = {
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_OPTIONAL_LOCKS: '0',
  GIT_LITERAL_PATHSPECS: '1',
};

/** `git …` as one fresh process in the sandbox. */
export function git(sb: Sandbox, args: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return sb.exec([...GIT, ...args], { timeout_s: 120, ...opts, env: { ...GIT_ENV, ...opts.env } });
}

/** A bash script as one fresh process (`--noprofile --norc`: nothing the workspace holds is sourced). */
export function script(sb: Sandbox, text: string, args: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return sb.exec(['bash', '--noprofile', '--norc', '-c', text, 'raas', ...args], { timeout_s: 120, ...opts, env: { ...GIT_ENV, ...opts.env } });
}

/**
 * The sandbox spec that materialises an instance's repository: its files map, or its tarball
 * (read on the host from the real path /process checked against sandbox.data_dirs, passed in
 * base64 and unpacked inside, so the files belong to the sandbox user).
 */
export async function repoSpec(inst: SweInstance, signal: AbortSignal, extra: Partial<SandboxSpec> = {}, extraFiles: Record<string, string> = {}): Promise<SandboxSpec> {
  if (inst.files) return { network: false, ...extra, files: { ...inst.files, ...extraFiles } };
  const bytes = await readCheckedFile(inst.tarball!, 'instance.tarball', undefined, signal);
  return { network: false, ...extra, files: { [TARBALL_FILE]: bytes.toString('base64'), ...extraFiles } };
}

/** git for bash scripts: a function `g` over the GIT argv. */
export const GIT_FN = `g() { ${GIT.map((a) => `'${a}'`).join(' ')} "$@"; }`;

/**
 * Unpacks the tarball (when there is one), then `git init` and a base commit, with bytecode caches
 * excluded so running the tests leaves the diff clean. Answers the base commit's id.
 */
export async function initRepo(sb: Sandbox, inst: SweInstance, signal: AbortSignal): Promise<string> {
  const z = /\.(tgz|tar\.gz)$/.test(inst.tarball ?? '') ? 'z' : '';
  const text = [
    'set -e',
    GIT_FN,
    inst.files ? ':' : `base64 -d ${TARBALL_FILE} | tar -x${z}f - && rm -f ${TARBALL_FILE}`,
    'g init -q .',
    'mkdir -p .git/info',
    "printf '__pycache__/\\n*.pyc\\n.raas-*\\n' >> .git/info/exclude",
    'g add -A',
    'g commit -q --allow-empty --no-verify -m base',
    'g rev-parse HEAD',
  ].join('\n');
  const r = await script(sb, text, [], { signal });
  const sha = r.stdout.trim();
  if (r.exit_code !== 0 || !/^[0-9a-f]{40,64}$/.test(sha)) {
    throw new RaasError('sandbox_error', `swe: could not set up the repository (exit ${r.exit_code ?? r.signal}): ${(r.stderr || r.stdout).slice(-2000)}`);
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
  if (add.exit_code !== 0) throw new RaasError('sandbox_error', `swe: git add failed (exit ${add.exit_code ?? add.signal}): ${add.stderr.slice(-2000)}`);
  const diff = await git(sb, ['diff', '--cached', '--binary', '--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', base, '--'], { signal, maxOutputBytes: maxBytes });
  if (diff.truncated) {
    throw new RaasError('sandbox_limit', `swe: the model's patch is over ${maxBytes} bytes (handlers.swe.max_patch_bytes); raise it or keep patches smaller`, { retryable: false });
  }
  if (diff.exit_code !== 0) throw new RaasError('sandbox_error', `swe: git diff failed (exit ${diff.exit_code ?? diff.signal}): ${diff.stderr.slice(-2000)}`);
  return diff.stdout;
}
