// Paths inside an image's root filesystem, resolved on the host as the sandbox would resolve them:
// an absolute symbolic link is re-rooted at the image's root and `..` never climbs above it, so an
// image's links (hostile input like the rest of it) never lead the host to its own files.
import fs from 'node:fs';
import path from 'node:path';

/** Links followed before giving up (the kernel's limit is 40). */
const MAX_HOPS = 40;

/**
 * The host path of `p` inside the image at `root`, or undefined when nothing is there. With
 * `wantTarget`, a missing last component still resolves (the path a file would be created at),
 * when its directory exists.
 */
export function inImage(root: string, p: string, opts: { wantTarget?: boolean } = {}): string | undefined {
  let parts = p.split('/').filter(Boolean);
  let cur = root;
  for (let hops = 0; parts.length; ) {
    const name = parts.shift()!;
    if (name === '.') continue;
    const next = name === '..' ? (cur === root ? root : path.dirname(cur)) : path.join(cur, name);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(next);
    } catch {
      return opts.wantTarget && parts.length === 0 ? next : undefined;
    }
    if (st.isSymbolicLink()) {
      if (++hops > MAX_HOPS) return undefined;
      const target = fs.readlinkSync(next);
      parts = [...target.split('/').filter(Boolean), ...parts];
      if (target.startsWith('/')) cur = root;
      continue;
    }
    if (parts.length && !st.isDirectory()) return undefined;
    cur = next;
  }
  return cur;
}

/** The first component of `p` (an absolute path inside the image) that is a symbolic link, as a path inside the image. */
export function symlinkOnPath(root: string, p: string): string | undefined {
  let inside = '';
  for (const name of p.split('/').filter(Boolean)) {
    inside = `${inside}/${name}`;
    const st = fs.lstatSync(path.join(root, inside), { throwIfNoEntry: false });
    if (!st) return undefined;
    if (st.isSymbolicLink()) return inside;
  }
  return undefined;
}
