// Red-team kit for image-rooted sandboxes: hostile images built at test time. Layers are tar files
// written entry by entry (Python's tarfile, so names, link targets, types, owners and PAX xattrs are
// exactly what the attack needs, not what a well-behaved tar would write), wrapped into OCI image
// layouts by umoci and into `docker save` archives by hand; a shared object that records every
// process that loads it, compiled with the host's gcc.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** One tar entry, as the attack wants it. */
export interface Entry {
  name: string;
  type?: 'file' | 'dir' | 'symlink' | 'hardlink' | 'chr' | 'blk';
  data?: string;
  /** Binary content (base64), instead of `data`. */
  b64?: string;
  link?: string;
  mode?: number;
  uid?: number;
  gid?: number;
  dev?: [number, number];
  /** PAX records, e.g. `SCHILY.xattr.security.capability` (values as latin-1 strings). */
  pax?: Record<string, string>;
}

const TAR_WRITER = `
import base64, json, sys, tarfile, io
out, spec = sys.argv[1], json.load(open(sys.argv[2]))
types = {'dir': tarfile.DIRTYPE, 'symlink': tarfile.SYMTYPE, 'hardlink': tarfile.LNKTYPE, 'chr': tarfile.CHRTYPE, 'blk': tarfile.BLKTYPE}
with tarfile.open(out, 'w', format=tarfile.PAX_FORMAT, encoding='utf-8', errors='surrogateescape') as t:
    for e in spec:
        ti = tarfile.TarInfo(e['name'])
        ti.mtime = 1700000000
        ti.uid, ti.gid = e.get('uid', 0), e.get('gid', 0)
        kind = e.get('type', 'file')
        ti.mode = e.get('mode', 0o755 if kind == 'dir' else 0o644)
        data = None
        if kind == 'file':
            data = base64.b64decode(e['b64']) if 'b64' in e else e.get('data', '').encode()
            ti.size = len(data)
        else:
            ti.type = types[kind]
        if kind in ('symlink', 'hardlink'):
            ti.linkname = e['link']
        if kind in ('chr', 'blk'):
            ti.devmajor, ti.devminor = e['dev']
        if 'pax' in e:
            ti.pax_headers = e['pax']
        t.addfile(ti, io.BytesIO(data) if data is not None else None)
`;

/** Writes `entries` as a tar file at `out`, exactly as given. */
export function writeTar(out: string, entries: Entry[]): void {
  const spec = `${out}.json`;
  fs.writeFileSync(spec, JSON.stringify(entries));
  try {
    execFileSync('python3', ['-c', TAR_WRITER, out, spec], { stdio: ['ignore', 'ignore', 'pipe'] });
  } finally {
    fs.rmSync(spec, { force: true });
  }
}

/**
 * An OCI image layout `<dir>` tagged `latest` whose layers are `layers` (each a tar of entries, or
 * the path of a tar file already written), with the config's Env and WorkingDir when given.
 */
export function ociLayout(dir: string, layers: Array<Entry[] | string>, config: { env?: string[]; workdir?: string } = {}): string {
  fs.rmSync(dir, { recursive: true, force: true });
  const image = `${dir}:latest`;
  execFileSync('umoci', ['init', '--layout', dir]);
  execFileSync('umoci', ['new', '--image', image]);
  layers.forEach((l, i) => {
    const tar = typeof l === 'string' ? l : `${dir}.layer${i}.tar`;
    if (typeof l !== 'string') writeTar(tar, l);
    try {
      execFileSync('umoci', ['raw', 'add-layer', '--image', image, tar], { stdio: ['ignore', 'ignore', 'pipe'] });
    } finally {
      if (typeof l !== 'string') fs.rmSync(tar, { force: true });
    }
  });
  const args = [
    ...(config.env ?? []).flatMap((e) => ['--config.env', e]),
    ...(config.workdir ? ['--config.workingdir', config.workdir] : []),
  ];
  if (args.length) execFileSync('umoci', ['config', '--image', image, ...args]);
  execFileSync('umoci', ['gc', '--layout', dir]);
  return dir;
}

/**
 * A `docker save` archive made by hand: manifest.json naming `layers` (paths inside the archive,
 * or anything else the attack wants there), a config whose diff_ids are `diffIds`, and `members`
 * (extra tar entries: the layers themselves, or links standing for them).
 */
export function dockerArchive(out: string, o: { layers: string[]; diffIds: string[]; members: Entry[] }): string {
  const config = JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: { Env: ['PATH=/bin'] },
    rootfs: { type: 'layers', diff_ids: o.diffIds },
    history: o.layers.map(() => ({ created_by: 'rt' })),
  });
  const configName = `${createHash('sha256').update(config).digest('hex')}.json`;
  const manifest = JSON.stringify([{ Config: configName, RepoTags: ['rt/evil:latest'], Layers: o.layers }]);
  writeTar(out, [{ name: 'manifest.json', data: manifest }, { name: configName, data: config }, ...o.members]);
  return out;
}

/** `sha256:<hex>` of a file (a layer's diff_id). */
export function fileDigest(file: string): string {
  return `sha256:${createHash('sha256').update(fs.readFileSync(file)).digest('hex')}`;
}

/**
 * A shared object whose constructor records the process that loaded it: it writes
 * `<dir>/raas-hijack-<pid>` holding /proc/self/exe's target. Also an NSS module (`_nss_rtevil_*`).
 * Undefined without gcc.
 */
export function compileHijack(out: string, markDir: string): string | undefined {
  if (spawnSync('gcc', ['--version']).status !== 0) return undefined;
  const src = `${out}.c`;
  fs.writeFileSync(
    src,
    `#include <stdio.h>
#include <unistd.h>
#include <fcntl.h>
#include <string.h>
#include <pwd.h>
#include <nss.h>
static void mark(const char *why) {
  char exe[512] = {0}, p[600];
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) < 0) strcpy(exe, "?");
  snprintf(p, sizeof p, "${markDir}/raas-hijack-%d-%s", (int)getpid(), why);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) { write(fd, exe, strlen(exe)); close(fd); }
}
__attribute__((constructor)) static void loaded(void) { mark("ctor"); }
enum nss_status _nss_rtevil_getpwuid_r(uid_t u, struct passwd *pw, char *b, size_t n, int *e) { mark("nss"); return NSS_STATUS_NOTFOUND; }
enum nss_status _nss_rtevil_getpwnam_r(const char *s, struct passwd *pw, char *b, size_t n, int *e) { mark("nss"); return NSS_STATUS_NOTFOUND; }
unsigned int la_version(unsigned int v) { mark("audit"); return v; }
`,
  );
  try {
    execFileSync('gcc', ['-shared', '-fPIC', '-O1', '-o', out, src], { stdio: ['ignore', 'ignore', 'pipe'] });
  } finally {
    fs.rmSync(src, { force: true });
  }
  return out;
}

/** Every file under `dir` (not following links) whose content holds one of `needles`: path → needle. */
export function filesHolding(dir: string, needles: string[]): string[] {
  const found: string[] = [];
  const walk = (p: string): void => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
    else if (st.isFile() && st.size < 64 << 20) {
      const text = fs.readFileSync(p, 'latin1');
      for (const n of needles) if (text.includes(n)) found.push(`${p}: ${n}`);
    }
  };
  walk(dir);
  return found;
}
