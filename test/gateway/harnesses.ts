import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The third-party harnesses the CI runs, each at a pinned version from the npm registry. */
export const QWEN_CODE = { pkg: '@qwen-code/qwen-code', version: '0.24.4', bin: 'qwen' } as const;
export const CODEX = { pkg: '@openai/codex', version: '0.171.0', bin: 'codex' } as const;
export const CLAUDE_CODE = { pkg: '@anthropic-ai/claude-code', version: '2.1.332', bin: 'claude' } as const;

/**
 * The npm prefix of a harness, installed once into `.raas/harness/<pkg>@<version>` (gitignored,
 * cached between runs) with the registry's own client, as an operator installs it. The sandbox only
 * ever binds it read-only; nothing is fetched while a job runs.
 */
export function installHarness(h: { pkg: string; version: string; bin: string }): string {
  const prefix = path.join(ROOT, '.raas/harness', `${h.pkg.replace('/', '+')}@${h.version}`);
  if (fs.existsSync(path.join(prefix, 'node_modules/.bin', h.bin))) return prefix;
  const tmp = `${prefix}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  const r = spawnSync('npm', ['install', '--prefix', tmp, '--no-audit', '--no-fund', '--no-package-lock', `${h.pkg}@${h.version}`], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0) throw new Error(`npm install ${h.pkg}@${h.version} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  fs.renameSync(tmp, prefix);
  return prefix;
}

/**
 * A copy of the prefix the sandbox user can read (as root, CI's checkout may be closed to it):
 * hard links under `dir`, so it costs no copy of the package.
 */
export function sandboxReadable(prefix: string, dir: string): string {
  const out = path.join(dir, path.basename(prefix));
  const r = spawnSync('cp', ['-al', prefix, out], { encoding: 'utf8' });
  if (r.status !== 0) {
    const c = spawnSync('cp', ['-a', prefix, out], { encoding: 'utf8' });
    if (c.status !== 0) throw new Error(`cannot copy ${prefix}: ${c.stderr}`);
  }
  return out;
}
