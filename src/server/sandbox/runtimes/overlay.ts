// The writable layer of an image-rooted sandbox: a tmpfs upper layer over the read-only image,
// mounted by the sandbox user inside a user and mount namespace of its own (`unshare -Urm`), where
// nothing of it is visible to the host. Two ways, measured on Debian 12 with kernel 6.18 (bench:swe):
// the kernel's overlayfs (allowed in a user namespace since Linux 5.11; `userxattr` because trusted.*
// attributes cannot be set there, and tmpfs keeps user.* attributes since Linux 6.6) costs nothing
// per file; fuse-overlayfs works on older kernels and costs a daemon per sandbox and, with the
// uncached lookups it needs to be right, 10–20× the kernel's time on metadata-heavy work (a `find`
// over /usr: 2.9–4.2 s against 0.06–0.3 s under load; docs/operations.md).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import type { SandboxIdentity } from '../host.js';
import { findBinary } from '../host.js';

/** How the writable layer is mounted. */
export type OverlayKind = 'kernel' | 'fuse';

/** The file descriptors a sandbox's launcher inherits (status, seccomp, network sync, host channel): a FUSE daemon must not hold them. */
const LAUNCH_FDS = [3, 4, 5, 9];

/**
 * Run by `unshare -Urm`: a tmpfs of `$size` over `$m` (the sandbox's mount point, private to the new
 * mount namespace), the image `$lower` as the overlay's lower layer and an upper layer on that
 * tmpfs, merged at `$m/root`; then the command (bwrap with the merged tree as its root). Every
 * write lands in the tmpfs and ends with the namespace; the image is never changed.
 */
const KERNEL = [
  'set -e',
  'm=$1; size=$2; lower=$3; shift 3',
  'mount -t tmpfs -o "size=$size,mode=0755" raas-upper "$m"',
  'mkdir "$m/upper" "$m/work" "$m/root"',
  'mount -t overlay raas-root -o "lowerdir=$lower,upperdir=$m/upper,workdir=$m/work,userxattr" "$m/root"',
  'exec "$@"',
].join('\n');

/**
 * The same with fuse-overlayfs: the daemon runs in the foreground of this script's process group
 * (a close that kills the group ends it) without the launcher's descriptors, and stops when the
 * command ends, which unmounts the tree with it. `timeout=0`: with the kernel's default caching of
 * lookups, fuse-overlayfs 1.10 shows a removed directory's old entries in a directory made again at
 * the same path (the probe below catches it).
 */
const FUSE = [
  'set -e',
  'm=$1; size=$2; lower=$3; shift 3',
  'mount -t tmpfs -o "size=$size,mode=0755" raas-upper "$m"',
  'mkdir "$m/upper" "$m/work" "$m/root"',
  `fuse-overlayfs -f -o "lowerdir=$lower,upperdir=$m/upper,workdir=$m/work,timeout=0" "$m/root" </dev/null ${LAUNCH_FDS.map((f) => `${f}>&-`).join(' ')} &`,
  'd=$!; n=0',
  'until grep -q " $m/root " /proc/self/mountinfo; do',
  '  kill -0 "$d" 2>/dev/null || { echo "raas: fuse-overlayfs exited before mounting the image" >&2; exit 1; }',
  '  n=$((n + 1)); [ "$n" -lt 1000 ] || { kill "$d"; echo "raas: fuse-overlayfs did not mount the image within 10 s" >&2; exit 1; }',
  '  sleep 0.01',
  'done',
  'set +e',
  '"$@"; rc=$?',
  'kill "$d" 2>/dev/null',
  'exit $rc',
].join('\n');

/** The script that mounts the writable layer and then runs its arguments. */
export function overlayScript(kind: OverlayKind): string {
  return kind === 'kernel' ? KERNEL : FUSE;
}

/**
 * What the probe does in the merged tree: the operations grading relies on (removing a directory
 * of the image and making it again, renaming one, deleting a file), which fail with EIO where the
 * upper layer cannot keep overlayfs's attributes.
 */
const PROBE_OPS = 'rm -rf "$1/d" && mkdir "$1/d" && mv "$1/e" "$1/e2" && rm "$1/f" && [ ! -e "$1/d/x" ] && echo raas-overlay-ok';

/** Which kind works here (`want` 'auto' tries the kernel first), or an error naming what is missing and the fix. */
export function probeOverlay(want: 'auto' | OverlayKind, root: string, identity: SandboxIdentity | undefined): OverlayKind {
  const unshare = findBinary('unshare');
  if (!unshare)
    throw new RaasError('sandbox_unavailable', 'image-rooted sandboxes need unshare (util-linux): apt-get install util-linux', {
      retryable: false,
    });
  const dir = path.join(root, 'ovl-probe');
  const lower = path.join(dir, 'lower');
  fs.rmSync(dir, { recursive: true, force: true });
  for (const d of [dir, lower, path.join(lower, 'd'), path.join(lower, 'e'), path.join(dir, 'mnt')]) fs.mkdirSync(d, { mode: 0o755 });
  fs.writeFileSync(path.join(lower, 'd', 'x'), 'x');
  fs.writeFileSync(path.join(lower, 'f'), 'f');
  // The image's files belong to the sandbox user (the cache makes them so): the probe's too.
  if (identity) {
    for (const p of [
      dir,
      lower,
      path.join(dir, 'mnt'),
      path.join(lower, 'd'),
      path.join(lower, 'e'),
      path.join(lower, 'd', 'x'),
      path.join(lower, 'f'),
    ])
      fs.chownSync(p, identity.uid, identity.gid);
  }
  const tried: string[] = [];
  try {
    for (const kind of want === 'auto' ? (['kernel', 'fuse'] as const) : [want]) {
      if (kind === 'fuse' && !findBinary('fuse-overlayfs')) {
        tried.push('fuse-overlayfs: not installed (apt-get install fuse-overlayfs)');
        continue;
      }
      const r = spawnSync(
        unshare,
        [
          '-Urm',
          '--propagation',
          'private',
          '/bin/sh',
          '-c',
          overlayScript(kind),
          'raas-overlay',
          path.join(dir, 'mnt'),
          '16m',
          lower,
        ].concat(['/bin/sh', '-c', PROBE_OPS, 'raas-probe', path.join(dir, 'mnt', 'root')]),
        {
          encoding: 'utf8',
          timeout: 20_000,
          uid: identity?.uid,
          gid: identity?.gid,
          cwd: '/',
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        },
      );
      if (r.stdout.includes('raas-overlay-ok')) return kind;
      tried.push(
        `${kind === 'kernel' ? 'kernel overlayfs' : 'fuse-overlayfs'}: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim().slice(-300)}`,
      );
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  throw new RaasError(
    'sandbox_unavailable',
    `image-rooted sandboxes need a writable overlay in an unprivileged user namespace, and none works here (${tried.join('; ')}): ` +
      'use Linux 6.6 or later for the kernel overlay on tmpfs, or install fuse-overlayfs; unprivileged user namespaces must be enabled (sysctl kernel.unprivileged_userns_clone=1)',
    { retryable: false },
  );
}
