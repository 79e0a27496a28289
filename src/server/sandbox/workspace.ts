import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import type { SandboxIdentity } from './host.js';
import { alive as pidAlive } from './proc.js';

/** Host directories of one sandbox: the workspace (mounted at /workspace) and its control directory. */
export interface SandboxDirs {
  /** `<root>/ws/<id>`: the writable workspace. */
  workspace: string;
  /** `<root>/run/<id>`: the tool server's socket (outside the workspace, so git and the agent never see it). */
  run: string;
}

/** Creates the workspace (from an image tree when given), writes the spec's files, hands both to the sandbox user. */
export function createDirs(root: string, id: string, files: Record<string, string> | undefined, owner: SandboxIdentity | undefined, imageDir?: string): SandboxDirs {
  const workspace = path.join(root, 'ws', id);
  const run = path.join(root, 'run', id);
  // Who owns the sandbox, outside anything the sandbox can write, for the janitor after a crash.
  // Refuse bad file keys before anything exists on disk, so a refused spec leaves nothing behind.
  for (const rel of Object.keys(files ?? {})) checkFileKey(workspace, rel);
  fs.mkdirSync(path.join(root, 'owners'), { recursive: true, mode: 0o755 });
  fs.writeFileSync(path.join(root, 'owners', id), String(process.pid));
  try {
    if (imageDir) fs.cpSync(imageDir, workspace, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    fs.mkdirSync(workspace, { recursive: true, mode: 0o755 });
    fs.mkdirSync(run, { recursive: true, mode: 0o700 });
    fillWorkspace(workspace, files, owner);
    if (owner) fs.chownSync(run, owner.uid, owner.gid);
  } catch (err) {
    removeDirs({ workspace, run });
    throw err;
  }
  return { workspace, run };
}

/**
 * Writes a spec's files (and an image tree) into a workspace and hands it to the sandbox user. Also
 * used for a pooled sandbox, whose workspace is still untouched when a job takes it.
 */
export function fillWorkspace(workspace: string, files: Record<string, string> | undefined, owner: SandboxIdentity | undefined, imageDir?: string): void {
  if (imageDir) fs.cpSync(imageDir, workspace, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  for (const [rel, content] of Object.entries(files ?? {})) {
    const target = checkFileKey(workspace, rel);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, content);
  }
  if (owner) chownTree(workspace, owner.uid, owner.gid);
}

function chownTree(dir: string, uid: number, gid: number): void {
  fs.lchownSync(dir, uid, gid);
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid, gid);
    else fs.lchownSync(p, uid, gid);
  }
}

/** Removes a sandbox's directories, including read-only trees the agent left behind. */
/** The host path of a spec's file key; refuses absolute keys and any escape from the workspace. */
function checkFileKey(workspace: string, rel: string): string {
  const target = path.resolve(workspace, rel);
  if (path.isAbsolute(rel) || rel.split(/[\\/]+/).includes('..') || !target.startsWith(workspace + path.sep)) {
    throw new RaasError('bad_request', `SandboxSpec.files key "${rel}" must be a relative path inside the workspace (no "..", not absolute)`, { retryable: false });
  }
  return target;
}

export function removeDirs(dirs: SandboxDirs): void {
  const id = path.basename(dirs.workspace);
  const root = path.dirname(path.dirname(dirs.workspace));
  for (const d of [dirs.workspace, dirs.run, path.join(root, 'owners', id)]) {
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {
      makeWritable(d);
      fs.rmSync(d, { recursive: true, force: true });
    }
  }
}

function makeWritable(dir: string): void {
  try {
    fs.chmodSync(dir, 0o700);
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) makeWritable(path.join(dir, e.name));
  } catch {
    /* best effort */
  }
}

/**
 * Removes the directories of sandboxes whose owning process is gone (a server killed with SIGKILL
 * cannot clean up; --die-with-parent already ended their processes). Runs when a runtime prepares.
 * Returns how many were removed.
 */
export function sweepOrphans(root: string): number {
  const owners = path.join(root, 'owners');
  let removed = 0;
  let ids: string[];
  try {
    ids = fs.readdirSync(owners);
  } catch {
    return 0;
  }
  for (const id of ids) {
    let pid = 0;
    try {
      pid = Number(fs.readFileSync(path.join(owners, id), 'utf8'));
    } catch {
      continue;
    }
    if (pid > 0 && pidAlive(pid)) continue;
    removeDirs({ workspace: path.join(root, 'ws', id), run: path.join(root, 'run', id) });
    removed++;
  }
  return removed;
}
