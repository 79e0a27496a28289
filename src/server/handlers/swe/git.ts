import type { ExecOptions, ExecResult, Sandbox } from '../../sandbox/types.js';

/**
 * git with our identity and with the hooks a repository can carry switched off: no hooks, no
 * fsmonitor, no external diff or textconv, no attributes file. Run through exec (a fresh process,
 * never the agent's shell), so shell functions or aliases named `git` do not apply.
 */
const GIT = [
  'git',
  '-c',
  'user.name=raas',
  '-c',
  'user.email=raas@localhost',
  '-c',
  'init.defaultBranch=main',
  '-c',
  'advice.detachedHead=false',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'core.attributesFile=/dev/null',
  '-c',
  'core.pager=cat',
  '-c',
  'diff.external=',
  '-c',
  'gc.auto=0',
];

/**
 * Environment of every git and test process: no global or system git config (HOME is the
 * workspace, so a `.gitconfig` in a patch would otherwise be read), pathspecs taken literally.
 */
const GIT_ENV: Record<string, string> = {
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
  return sb.exec(['bash', '--noprofile', '--norc', '-c', text, 'raas', ...args], {
    timeout_s: 120,
    ...opts,
    env: { ...GIT_ENV, ...opts.env },
  });
}

/** git for bash scripts: a function `g` over the GIT argv. */
export const GIT_FN = `g() { ${GIT.map((a) => `'${a}'`).join(' ')} "$@"; }`;
