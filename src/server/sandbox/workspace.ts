import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import type { SandboxIdentity } from './host.js';
import { alive as pidAlive } from './proc.js';

/** Host directories of one sandbox: the workspace (mounted at /workspace) and its control directory. */
export interface SandboxDirs {
  /** `<root>/ws/<id>`: the host workspace of runtimes that bind one (apptainer, process); for bwrap it never exists. */
  workspace: string;
  /** `<root>/run/<id>`: the tool server's socket for runtimes that listen on a path (outside the workspace). */
  run: string;
  /** The workspace is a directory the caller owns (an image build's output): bound, never removed here. */
  bound?: boolean;
}

/**
 * How a sandbox's workspace lives: `private` (bwrap: a tmpfs inside the sandbox; nothing on the
 * host), `host` (apptainer, process: `<root>/ws/<id>`, seeded from an image before anything runs),
 * `socket` (apptainer rooted in an instance's image: the workspace is inside the image, only the
 * socket's directory is on the host), or `bind` (an image build: the caller's directory).
 */
export type WorkspaceMode = { mode: 'private' } | { mode: 'socket' } | { mode: 'host'; imageDir?: string } | { mode: 'bind'; dir: string };

/** Records the owner, and creates the host directories the mode needs, handed to the sandbox user. */
export function createDirs(root: string, id: string, owner: SandboxIdentity | undefined, ws: WorkspaceMode): SandboxDirs {
  const run = path.join(root, 'run', id);
  const dirs: SandboxDirs = { workspace: ws.mode === 'bind' ? ws.dir : path.join(root, 'ws', id), run, bound: ws.mode === 'bind' };
  // Who owns the sandbox, outside anything the sandbox can write, for the janitor after a crash.
  fs.mkdirSync(path.join(root, 'owners'), { recursive: true, mode: 0o755 });
  fs.writeFileSync(path.join(root, 'owners', id), String(process.pid));
  try {
    if (ws.mode === 'host') {
      if (ws.imageDir) fs.cpSync(ws.imageDir, dirs.workspace, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
      fs.mkdirSync(dirs.workspace, { recursive: true, mode: 0o755 });
      fs.mkdirSync(run, { recursive: true, mode: 0o700 });
      if (owner) {
        chownTree(dirs.workspace, owner.uid, owner.gid);
        fs.chownSync(run, owner.uid, owner.gid);
      }
    } else if (ws.mode === 'socket') {
      fs.mkdirSync(run, { recursive: true, mode: 0o700 });
      if (owner) fs.chownSync(run, owner.uid, owner.gid);
    } else if (ws.mode === 'bind') {
      fs.mkdirSync(dirs.workspace, { recursive: true, mode: 0o755 });
      if (owner) chownTree(dirs.workspace, owner.uid, owner.gid);
    }
  } catch (err) {
    removeDirs(dirs);
    throw err;
  }
  return dirs;
}

/** Hands a tree the host just wrote (before any sandbox code ran in it) to the sandbox user. */
function chownTree(dir: string, uid: number, gid: number): void {
  fs.lchownSync(dir, uid, gid);
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid, gid);
    else fs.lchownSync(p, uid, gid);
  }
}

/** Refuses a spec's file key that is absolute or leaves the workspace (checked before anything starts). */
export function checkFileKey(rel: string): void {
  const parts = rel.split(/[\\/]+/);
  if (rel === '' || path.isAbsolute(rel) || parts.includes('..') || rel.includes('\0')) {
    throw new RaasError(
      'bad_request',
      `SandboxSpec.files key "${rel}" must be a relative path inside the workspace (no "..", not absolute)`,
      { retryable: false },
    );
  }
}

/**
 * Removes a sandbox's host directories once its processes are gone. Never follows a link the
 * sandbox may have planted: rmSync works on lstat, and the fallback that makes read-only trees
 * writable changes only real directories (checked with lstat, nothing runs any more to swap them).
 */
export function removeDirs(dirs: SandboxDirs): void {
  const id = path.basename(dirs.workspace);
  const root = path.dirname(path.dirname(dirs.workspace));
  for (const d of [...(dirs.bound ? [] : [dirs.workspace]), dirs.run, path.join(root, 'owners', id)]) {
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
    if (!fs.lstatSync(dir).isDirectory()) return;
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
