// Ownership flattening: after a converter ran as the server's user (root, so it could read any
// source), every entry of the tree is handed to the sandbox user. The same pass removes what an
// image must not bring onto the host's disk: device nodes (raw access to host devices for anyone
// who reaches the cache), setuid/setgid bits and file capabilities (pointless in a sandbox, which
// runs with no_new_privs on a nosuid mount, and a hazard on the host); and it measures the tree for
// the budget.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Stats } from 'node:fs';
import type { Owner } from './types.js';

/** What a flatten pass did. */
export interface FlattenResult {
  /** Disk usage (512-byte blocks; a hard-linked file once). */
  bytes: number;
  entries: number;
  /** Block and character devices removed. */
  devices: number;
  /** Files whose setuid or setgid bit was cleared. */
  setid: number;
}

// Directories listed at once; each listing lstat()s its entries one by one.
const CONCURRENCY = 32;

/**
 * Walks `root` (not following symlinks): removes device nodes, lchown()s every other entry to
 * `owner` (every file, which drops its capabilities) and clears setuid/setgid bits on files. Checks the signal between directories.
 */
export async function flattenTree(root: string, owner: Owner, signal?: AbortSignal): Promise<FlattenResult> {
  const res: FlattenResult = { bytes: 0, entries: 0, devices: 0, setid: 0 };
  const seen = new Set<number>();
  const fix = async (p: string, st: Stats): Promise<void> => {
    res.entries++;
    if (st.isBlockDevice() || st.isCharacterDevice()) {
      await fs.unlink(p);
      res.devices++;
      return;
    }
    if (st.nlink < 2 || st.isDirectory() || !seen.has(st.ino)) res.bytes += st.blocks * 512;
    if (st.nlink > 1 && !st.isDirectory()) seen.add(st.ino);
    // chown() also drops file capabilities (security.capability), even to the same owner: a file the
    // image already gives to the sandbox user would otherwise keep them (cp -a copies them), in a
    // cache every host user can reach, where running it would grant them.
    if (st.uid !== owner.uid || st.gid !== owner.gid || st.isFile()) await fs.lchown(p, owner.uid, owner.gid);
    // chown() clears the bits for an unprivileged caller only; root keeps them, so clear them here.
    if (!st.isSymbolicLink() && !st.isDirectory() && st.mode & 0o6000) {
      await fs.chmod(p, st.mode & 0o1777);
      res.setid++;
    }
  };
  const walkDir = async (dir: string, pending: string[]): Promise<void> => {
    for (const name of await fs.readdir(dir)) {
      const p = path.join(dir, name);
      const st = await fs.lstat(p);
      await fix(p, st);
      if (st.isDirectory()) pending.push(p);
    }
  };
  signal?.throwIfAborted();
  const top = await fs.lstat(root);
  if (!top.isDirectory()) throw new Error(`${root} is not a directory`);
  await fix(root, top);
  const pending = [root];
  let active = 0;
  let failed: unknown;
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      while (!failed && active < CONCURRENCY && pending.length) {
        if (signal?.aborted) failed = signal.reason;
        else {
          active++;
          walkDir(pending.pop()!, pending).then(
            () => (active--, pump()),
            (e: unknown) => ((failed ??= e), active--, pump()),
          );
        }
      }
      if (active === 0 && (failed || pending.length === 0)) resolve();
    };
    pump();
  });
  if (failed) throw failed;
  return res;
}

/**
 * Removes a tree even when the server is not root and the image has read-only directories
 * (mode 0555 dirs are common in images): on EACCES it makes directories writable and retries.
 */
export async function removeTree(p: string): Promise<void> {
  try {
    await fs.rm(p, { recursive: true, force: true, maxRetries: 2 });
    return;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EACCES' && (e as NodeJS.ErrnoException).code !== 'EPERM') throw e;
  }
  const open = async (d: string): Promise<void> => {
    await fs.chmod(d, 0o700).catch(() => undefined);
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) if (e.isDirectory()) await open(path.join(d, e.name));
  };
  await open(p);
  await fs.rm(p, { recursive: true, force: true, maxRetries: 2 });
}
