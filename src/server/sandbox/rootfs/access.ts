// Whether the sandbox user can reach a host path: every ancestor must grant it search (x)
// permission, or the launcher's bind of the root filesystem fails inside the sandbox.
import fs from 'node:fs';
import path from 'node:path';
import type { Owner } from './types.js';

/** The first directory on the way to `p` (inclusive) that `owner` cannot traverse, or undefined. */
export function untraversable(p: string, owner: Owner): string | undefined {
  if (owner.uid === 0) return undefined;
  const parts = path.resolve(p).split(path.sep).filter(Boolean);
  let cur: string = path.sep;
  for (let i = 0; i <= parts.length; i++) {
    if (i > 0) cur = path.join(cur, parts[i - 1]);
    const st = fs.statSync(cur, { throwIfNoEntry: false });
    if (!st) return cur;
    const bit = st.uid === owner.uid ? 0o100 : st.gid === owner.gid ? 0o010 : 0o001;
    if (!(st.mode & bit)) return cur;
  }
  return undefined;
}

/** True when `dir` and its top-level entries belong to `owner` (uid and gid): a tree usable in place. */
export function ownedBy(dir: string, owner: Owner): boolean {
  const mine = (st: fs.Stats | undefined): boolean => st !== undefined && st.uid === owner.uid && st.gid === owner.gid;
  if (!mine(fs.lstatSync(dir, { throwIfNoEntry: false }))) return false;
  return fs.readdirSync(dir).every((n) => mine(fs.lstatSync(path.join(dir, n), { throwIfNoEntry: false })));
}
