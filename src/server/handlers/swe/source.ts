import fs from 'node:fs/promises';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';
import type { StageContext } from '../types.js';
import { GIT_FN, script } from './git.js';

/**
 * SWE-bench rows name their repository (`repo` at `base_commit`) instead of carrying it. The
 * operator provides repositories on the server's disk (`handlers.swe.repos_dir`: bare mirrors or
 * bundles; `handlers.swe.images_dir`: unpacked per-instance images whose /testbed is the
 * repository). A setup sandbox, with those paths bound read-only, fetches only the base commit
 * (`--depth=1`) and hands it back as a gzipped git directory; the agent's and the grader's
 * sandboxes never see the mirror, so the commits after the base commit (the fix among them) stay
 * out of the model's reach.
 */

/** A place on the host that may hold an instance's repository. */
interface RepoSource {
  /** A git directory (a bare mirror, or an image's /testbed/.git) or a bundle file. */
  host: string;
  kind: 'git_dir' | 'bundle';
}

/** Where resolution looked: what exists, and every path tried with what was found there. */
interface SourceSearch {
  sources: RepoSource[];
  tried: string[];
}

/** The base commit as a gzipped tar of a git directory whose `main` is that commit (depth 1). */
export interface RepoSnapshot {
  kind: 'snapshot';
  bytes: Buffer;
  /** The full id of the base commit. */
  commit: string;
  /** The host path the commit came from. */
  source: string;
}

/** Where the sources appear inside the setup sandbox (never under the workspace). */
const INSIDE = '/raas-src';
const SNAPSHOT_FILE = '.raas-snap.tgz';
/** The script's exit status when no source has the commit. */
const NO_COMMIT = 3;

/**
 * SWE-bench image names of an instance, lowercased: ProRL's (`__` → `_s_`,
 * openhands/nvidia/swe_agent/utils.py@40c1d8a:76-102) and SWE-bench's (`__` → `_1776_`,
 * swebench/harness/test_spec/test_spec.py@726c546:107-110). Empty for an id that is not a plain name.
 */
export function sweImageNames(instanceId: unknown): string[] {
  if (typeof instanceId !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/.test(instanceId)) return [];
  return [
    ...new Set([instanceId.replace(/__/g, '_s_'), instanceId.replace(/__/g, '_1776_')].map((id) => `sweb.eval.x86_64.${id}`.toLowerCase())),
  ];
}

/** Every host path that may hold `inst`'s repository, in the order they are tried. */
async function findRepoSources(inst: SweInstance, cfg: SweHandlerConfig): Promise<SourceSearch> {
  const out: SourceSearch = { sources: [], tried: [] };
  const [owner, name] = (inst.repo ?? '').split('/') as [string, string];
  if (cfg.repos_dir) {
    for (const p of [path.join(cfg.repos_dir, `${owner}__${name}.git`), path.join(cfg.repos_dir, owner, `${name}.git`)]) {
      const st = await fs.stat(p).catch(() => undefined);
      if (st?.isDirectory() && (await isGitDir(p))) out.sources.push({ host: p, kind: 'git_dir' });
      else out.tried.push(`${p} (${st ? 'not a git directory' : 'absent'})`);
    }
    const bundle = path.join(cfg.repos_dir, `${owner}__${name}.bundle`);
    const st = await fs.stat(bundle).catch(() => undefined);
    if (st?.isFile()) out.sources.push({ host: bundle, kind: 'bundle' });
    else out.tried.push(`${bundle} (${st ? 'not a file' : 'absent'})`);
  }
  if (cfg.images_dir) {
    const names = sweImageNames(inst.instance_id);
    if (!names.length)
      out.tried.push(
        `${cfg.images_dir}/sweb.eval.x86_64.<instance_id> (instance.instance_id ${JSON.stringify(inst.instance_id ?? null)} is not a name an image can have)`,
      );
    for (const n of names) {
      const dir = path.join(cfg.images_dir, n);
      const gitDir = path.join(dir, 'testbed', '.git');
      const st = await fs.stat(dir).catch(() => undefined);
      if (st?.isDirectory() && (await isGitDir(gitDir))) out.sources.push({ host: gitDir, kind: 'git_dir' });
      else out.tried.push(`${st?.isDirectory() ? gitDir : dir} (${st?.isDirectory() ? 'no git repository at /testbed' : 'absent'})`);
      for (const sif of [`${dir}.sif`, `${dir}_latest.sif`]) {
        if (
          await fs.stat(sif).then(
            (s) => s.isFile(),
            () => false,
          )
        ) {
          out.tried.push(
            `${sif} (a SIF image: with handlers.swe.image_root false the repository is read only from unpacked images; unpack it with \`apptainer build --sandbox ${dir} ${sif}\`, or root the sandboxes in it with image_root: true)`,
          );
        }
      }
    }
  }
  return out;
}

/** A git directory: HEAD and objects/ (a bare mirror or a .git). */
async function isGitDir(p: string): Promise<boolean> {
  const [head, objects] = await Promise.all([
    fs.stat(path.join(p, 'HEAD')).catch(() => undefined),
    fs.stat(path.join(p, 'objects')).catch(() => undefined),
  ]);
  return !!head?.isFile() && !!objects?.isDirectory();
}

/**
 * The base commit of a SWE-bench row, from the first source that has it, fetched in a setup
 * sandbox (no network, no tools, the sources bound read-only, git run as the sandbox user). Throws
 * `invalid_instance` naming every path tried when nothing provides it (INIT: `critical_error: "init"`).
 */
export async function snapshotBaseCommit(ctx: StageContext<SweInstance>): Promise<RepoSnapshot> {
  const inst = ctx.job.instance;
  const cfg = ctx.config as SweHandlerConfig;
  const what = `repository ${inst.repo} at ${inst.base_commit} (instance ${JSON.stringify(inst.instance_id ?? null)})`;
  if (!cfg.repos_dir && !cfg.images_dir) {
    throw new RaasError(
      'invalid_instance',
      `swe: nothing provides the ${what}: neither handlers.swe.repos_dir nor handlers.swe.images_dir is set in the server config`,
      { retryable: false },
    );
  }
  const search = await findRepoSources(inst, cfg);
  if (!search.sources.length) {
    const [owner, name] = inst.repo!.split('/');
    const hint = cfg.repos_dir
      ? `; add one with \`git clone --mirror https://github.com/${inst.repo}.git ${path.join(cfg.repos_dir, `${owner}__${name}.git`)}\``
      : '';
    throw new RaasError('invalid_instance', `swe: nothing provides the ${what}; looked for ${search.tried.join('; ')}${hint}`, {
      retryable: false,
    });
  }
  const inside = search.sources.map((s, k) => (s.kind === 'bundle' ? `${INSIDE}/${k}.bundle` : `${INSIDE}/${k}`));
  const toHost = (text: string): string => inside.reduce((t, p, k) => t.replaceAll(p, search.sources[k]!.host), text);
  const sb = await ctx.sandboxes.open(
    { network: false, tools: [], readOnly: search.sources.map((s, k) => ({ host: s.host, inside: inside[k]! })) },
    ctx.signal,
  );
  try {
    // The unisolated `process` runtime (its workspace is a host directory) binds nothing: it reads the host paths.
    const paths = sb.isolated === false ? search.sources.map((s) => s.host) : inside;
    const r = await script(sb, SNAPSHOT_SCRIPT, [inst.base_commit!, ...paths], { timeout_s: 1800, signal: ctx.signal });
    const notes = toHost(r.stderr.trim())
      .replace(/\s*\n\s*/g, '; ')
      .slice(-4000);
    if (r.exit_code === NO_COMMIT) {
      const tried = [...search.tried, notes].filter(Boolean).join('; ');
      throw new RaasError(
        'invalid_instance',
        `swe: nothing provides the ${what}: ${tried}; update the mirror (git -C <mirror> remote update) or add the image`,
        { retryable: false },
      );
    }
    const lines = r.stdout.trim().split('\n');
    const commit = lines[lines.length - 1]!;
    if (r.exit_code !== 0 || !/^[0-9a-f]{40,64}$/.test(commit)) {
      throw new RaasError(
        'sandbox_error',
        `swe: could not take the ${what} out of ${search.sources.map((s) => s.host).join(', ')} (exit ${r.exit_code ?? r.signal}): ${notes}`,
      );
    }
    const from = Number(lines[lines.length - 2]);
    const bytes = await sb.readFile(SNAPSHOT_FILE, { maxBytes: cfg.max_repo_bytes ?? 1 << 30, signal: ctx.signal });
    return { kind: 'snapshot', bytes, commit, source: search.sources[from]?.host ?? '' };
  } finally {
    await sb.close();
  }
}

/**
 * Run in the setup sandbox with the base commit and the bound sources: the first source with the
 * commit gives it to a fresh repository (`fetch --depth=1`, so no later commit comes along), whose
 * git directory is tarred. A bundle is first fetched whole into a scratch repository (bundles take
 * no depth). Prints the source's index and the full commit id; exit 3 when no source has it, with a
 * line per source on stderr.
 */
const SNAPSHOT_SCRIPT = [
  'set -e',
  GIT_FN,
  'base=$1; shift',
  'g init -q snap',
  'k=-1',
  'for src in "$@"; do',
  '  k=$((k + 1)); dir=$src',
  '  case "$src" in',
  '    *.bundle)',
  '      dir=$PWD/.raas-bundle.git; rm -rf "$dir"',
  `      if ! { g init -q --bare "$dir" && g --git-dir="$dir" fetch -q --no-tags "$src" '+refs/*:refs/*'; } 2>.raas-err; then`,
  '        echo "$src: not a bundle git can read: $(tail -c 500 .raas-err)" >&2; continue',
  '      fi ;;',
  '  esac',
  '  if ! commit=$(g --git-dir="$dir" rev-parse -q --verify "$base^{commit}" 2>/dev/null); then',
  '    echo "$src: has no commit $base" >&2; continue',
  '  fi',
  // The serving side is a local upload-pack: fetching a commit by id needs allowAnySHA1InWant, and
  // the operator's mirror belongs to another user (safe.directory; the mirror is trusted and read-only).
  `  if ! g -C snap fetch -q --no-tags --depth=1 --upload-pack="git -c safe.directory='*' -c uploadpack.allowAnySHA1InWant=true upload-pack" "$dir" "$commit" 2>.raas-err; then`,
  '    echo "$src: fetching $commit failed: $(tail -c 500 .raas-err)" >&2; continue',
  '  fi',
  '  g -C snap update-ref refs/heads/main "$commit"',
  '  rm -f snap/.git/FETCH_HEAD',
  `  tar -C snap/.git -czf ${SNAPSHOT_FILE} .`,
  '  echo "$k"; echo "$commit"',
  '  exit 0',
  'done',
  `exit ${NO_COMMIT}`,
].join('\n');
