// The on-disk cache: `<cacheDir>/<key>/{rootfs/, complete.json, last-used}`, and
// `.use-<key>-<pid>` while a process runs sandboxes on an entry (eviction skips it). An entry is complete
// when complete.json is there (it is written last, before the rename into place); anything else
// under a key is partial and is redone. Temporary trees are `.tmp-<key>-<pid>-<rand>`, entries
// being evicted `.evict-<key>-<pid>-<rand>`: both are removed once their pid is dead.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { ImageSource } from './detect.js';
import { pidAlive } from './lock.js';
import type { Owner } from './types.js';

/** Bump when the layout of entries changes: old entries then get new keys and age out. */
const LAYOUT_VERSION = 'rootfs-v1';

/** complete.json: what the cache records about an entry, written last. */
export const EntryRecord = z.object({
  env: z.record(z.string(), z.string()),
  workdir: z.string().optional(),
  bytes: z.number().nonnegative(),
  form: z.enum(['directory', 'sif', 'oci', 'docker-archive']),
  source: z.string(),
  created: z.string(),
  convert_ms: z.number(),
});
/** A parsed complete.json. */
export type EntryRecord = z.infer<typeof EntryRecord>;

/**
 * The cache key of a source: sha256 of the form, real path, size and mtime (for directories also
 * the top-level listing with each entry's size and mtime, and a bundle's rootfs/ listing), the tag,
 * and the owner. A changed source gets a new key; a change deep inside a directory does not.
 */
export function entryKey(src: ImageSource, owner: Owner): string {
  const st = fs.statSync(src.path);
  const h = createHash('sha256').update(JSON.stringify([LAYOUT_VERSION, src.form, src.path, st.size, st.mtimeMs, src.tag ?? null]));
  h.update(`owner ${owner.uid}:${owner.gid}`);
  if (st.isDirectory()) {
    for (const dir of new Set([src.path, src.root ?? src.path])) {
      for (const name of fs.readdirSync(dir).sort()) {
        const e = fs.lstatSync(path.join(dir, name), { throwIfNoEntry: false });
        h.update(`\0${dir === src.path ? '' : 'rootfs/'}${name}\0${e?.mode ?? 0}\0${e?.size ?? 0}\0${e?.mtimeMs ?? 0}`);
      }
    }
  }
  return h.digest('hex').slice(0, 32);
}

/** Paths of one entry. */
export function entryPaths(
  cacheDir: string,
  key: string,
): { dir: string; rootfs: string; complete: string; lastUsed: string; lock: string } {
  const dir = path.join(cacheDir, key);
  return {
    dir,
    rootfs: path.join(dir, 'rootfs'),
    complete: path.join(dir, 'complete.json'),
    lastUsed: path.join(dir, 'last-used'),
    lock: path.join(cacheDir, `.${key}.lock`),
  };
}

/** A fresh temporary directory name for building `key` (removed by its pid, or once that pid is dead). */
export function tempName(cacheDir: string, key: string, kind: 'tmp' | 'evict' = 'tmp'): string {
  return path.join(cacheDir, `.${kind}-${key}-${process.pid}-${randomBytes(4).toString('hex')}`);
}

/** The record of a complete entry, or undefined when the entry is missing, partial or corrupt. */
export function readEntry(cacheDir: string, key: string): EntryRecord | undefined {
  const p = entryPaths(cacheDir, key);
  try {
    const rec = EntryRecord.safeParse(JSON.parse(fs.readFileSync(p.complete, 'utf8')));
    if (!rec.success || !fs.statSync(p.rootfs).isDirectory()) return undefined;
    return rec.data;
  } catch {
    return undefined;
  }
}

/** Writes complete.json into a (temporary) entry directory: the last step before the rename. */
export function writeRecord(dir: string, rec: EntryRecord): void {
  fs.writeFileSync(path.join(dir, 'complete.json'), JSON.stringify(rec) + '\n', { mode: 0o644 });
}

/** Records a use of the entry (ms since the epoch, from the store's clock). */
export function touchEntry(cacheDir: string, key: string, at: number): void {
  const p = entryPaths(cacheDir, key);
  const tmp = `${p.lastUsed}.${process.pid}`;
  try {
    fs.writeFileSync(tmp, `${Math.round(at)}\n`, { mode: 0o644 });
    fs.renameSync(tmp, p.lastUsed);
  } catch {
    /* evicted meanwhile: the caller's next read notices */
  }
}

/** One complete entry as eviction sees it. */
export interface EntryInfo {
  key: string;
  bytes: number;
  lastUsed: number;
}

/** Every complete entry of the cache with its size and last use. */
export function listEntries(cacheDir: string): EntryInfo[] {
  const out: EntryInfo[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(cacheDir);
  } catch {
    return out;
  }
  for (const key of names) {
    if (!/^[a-f0-9]{32}$/.test(key)) continue;
    const rec = readEntry(cacheDir, key);
    if (!rec) continue;
    let lastUsed = Date.parse(rec.created);
    try {
      lastUsed = Number(fs.readFileSync(entryPaths(cacheDir, key).lastUsed, 'utf8')) || lastUsed;
    } catch {
      /* never touched: its creation time */
    }
    out.push({ key, bytes: rec.bytes, lastUsed });
  }
  return out;
}

/** Temporary and evicted trees whose creating process is gone. */
export function orphans(cacheDir: string): string[] {
  const out: string[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(cacheDir);
  } catch {
    return out;
  }
  for (const n of names) {
    const m = /^\.(?:tmp|evict)-[a-f0-9]{32}-(\d+)-[a-f0-9]{8}$/.exec(n);
    if (m && !pidAlive(Number(m[1]))) out.push(path.join(cacheDir, n));
  }
  return out;
}

function useMarker(cacheDir: string, key: string, pid: number): string {
  return path.join(cacheDir, `.use-${key}-${pid}`);
}

/** Records (or clears) that this process runs sandboxes on the entry `key`. */
export function markUse(cacheDir: string, key: string, inUse: boolean): void {
  const f = useMarker(cacheDir, key, process.pid);
  try {
    if (inUse) fs.writeFileSync(f, `${process.pid}\n`, { mode: 0o644 });
    else fs.rmSync(f, { force: true });
  } catch {
    /* the cache directory is gone: nothing to protect */
  }
}

/** True when another live process marked the entry in use (markers of dead processes are removed). */
export function inUseElsewhere(cacheDir: string, key: string): boolean {
  let names: string[];
  try {
    names = fs.readdirSync(cacheDir);
  } catch {
    return false;
  }
  const prefix = `.use-${key}-`;
  let used = false;
  for (const n of names) {
    if (!n.startsWith(prefix)) continue;
    const pid = Number(n.slice(prefix.length));
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (pidAlive(pid)) used = true;
    else fs.rmSync(path.join(cacheDir, n), { force: true });
  }
  return used;
}
