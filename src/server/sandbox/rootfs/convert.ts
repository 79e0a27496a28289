// One conversion per form, into `<tmp>/rootfs` of a temporary entry directory. The converters run
// as the server's user: as root they read any source and keep setuid bits (unsquashfs run as
// another user drops them, and umoci cannot read a root-made layout's 0600 index.json); the
// caller then hands the tree to the sandbox user with flattenTree().
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { RaasError } from '../../../protocol/errors.js';
import type { Logger } from '../../../util/logger.js';
import type { ImageSource } from './detect.js';
import { ociEnv, singularityEnv } from './env.js';
import { runTool } from './exec.js';
import { removeTree } from './flatten.js';
import { imageConfig, selectTag } from './oci.js';
import { hostGoArch, readSifPartition } from './sif.js';

/** The image's environment, as each form records it. */
export interface ImageMeta {
  env: Record<string, string>;
  workdir?: string;
}

/** What a conversion needs besides its source. */
export interface ConvertContext {
  /** The temporary entry directory; the tree goes to `<tmp>/rootfs`. */
  tmp: string;
  signal: AbortSignal;
  log?: Logger;
}

const BundleConfig = z.object({
  process: z.object({ env: z.array(z.string()).optional(), cwd: z.string().optional() }).optional(),
});

/** The environment of a directory image: an OCI bundle's config.json, else Apptainer's env scripts. */
export function directoryMeta(src: ImageSource): ImageMeta {
  if (src.bundleConfig) {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(src.bundleConfig, 'utf8'));
    } catch (e) {
      throw new RaasError('invalid_instance', `rootfs image ${src.path}: config.json is not JSON: ${(e as Error).message}`, {
        retryable: false,
      });
    }
    const cfg = BundleConfig.safeParse(raw);
    if (!cfg.success)
      throw new RaasError('invalid_instance', `rootfs image ${src.path}: config.json has no valid process section`, { retryable: false });
    return { env: ociEnv(cfg.data.process?.env ?? []), workdir: cfg.data.process?.cwd || undefined };
  }
  return { env: singularityEnv(src.root ?? src.path) };
}

const asRoot = (): boolean => process.getuid?.() === 0;

async function importDirectory(src: ImageSource, c: ConvertContext): Promise<ImageMeta> {
  // cp -a keeps modes, symlinks, hard links and sparse files; device nodes it recreates are
  // dropped by the flatten pass. --one-file-system: a mount below the tree is not the image.
  await runTool(['cp', '-a', '--one-file-system', '--reflink=auto', '--', src.root ?? src.path, path.join(c.tmp, 'rootfs')], {
    signal: c.signal,
    log: c.log,
    what: `importing ${src.path}`,
  });
  return directoryMeta(src);
}

async function unpackSif(src: ImageSource, c: ConvertContext): Promise<ImageMeta> {
  const part = await readSifPartition(src.path, c.signal);
  if (part.arch !== 'unknown' && part.arch !== hostGoArch()) {
    throw new RaasError('invalid_instance', `rootfs image ${src.path}: the SIF is built for ${part.arch}, this host is ${hostGoArch()}`, {
      retryable: false,
    });
  }
  // Not root, unsquashfs cannot create device nodes and exits 2 for those "non-fatal" errors.
  const r = await runTool(['unsquashfs', '-n', '-q', '-no-xattrs', '-o', String(part.offset), '-d', path.join(c.tmp, 'rootfs'), src.path], {
    signal: c.signal,
    log: c.log,
    ok: asRoot() ? [0] : [0, 2],
    what: `unpacking ${src.path}`,
  });
  if (r.code !== 0) c.log?.warn({ source: src.path, stderr: r.stderr.slice(-1000) }, 'rootfs: unsquashfs skipped entries');
  return { env: singularityEnv(path.join(c.tmp, 'rootfs')) };
}

async function unpackOci(layout: string, tag: string | undefined, c: ConvertContext): Promise<ImageMeta> {
  const chosen = selectTag(layout, tag);
  const bundle = path.join(c.tmp, 'bundle');
  // --rootless: no chown to the image's uids and device nodes become empty files; whiteouts are applied.
  await runTool(['umoci', 'unpack', '--rootless', '--image', `${layout}:${chosen}`, bundle], {
    signal: c.signal,
    log: c.log,
    what: `unpacking ${layout}:${chosen}`,
  });
  fs.renameSync(path.join(bundle, 'rootfs'), path.join(c.tmp, 'rootfs'));
  let meta: ImageMeta;
  try {
    meta = imageConfig(layout, chosen);
  } catch (e) {
    // The blobs umoci just read are there; this only fails for layouts we cannot parse ourselves.
    c.log?.warn({ layout, err: (e as Error).message }, 'rootfs: image config unreadable, using the bundle config');
    meta = directoryMeta({ form: 'directory', path: bundle, bundleConfig: path.join(bundle, 'config.json') });
  }
  await removeTree(bundle);
  return meta;
}

async function unpackDockerArchive(src: ImageSource, c: ConvertContext): Promise<ImageMeta> {
  const layout = path.join(c.tmp, 'oci');
  // Both ends are local files, so no signature policy applies; TMPDIR keeps skopeo's staging on the cache's disk.
  await runTool(
    ['skopeo', '--insecure-policy', 'copy', '--quiet', `docker-archive:${src.path}:${src.tag ?? '@0'}`, `oci:${layout}:latest`],
    { signal: c.signal, log: c.log, env: { ...process.env, TMPDIR: c.tmp }, what: `converting ${src.path}` },
  );
  const meta = await unpackOci(layout, 'latest', c);
  await removeTree(layout);
  return meta;
}

/** Converts `src` into `<ctx.tmp>/rootfs` and returns its environment. */
export function convertSource(src: ImageSource, c: ConvertContext): Promise<ImageMeta> {
  switch (src.form) {
    case 'directory':
      return importDirectory(src, c);
    case 'sif':
      return unpackSif(src, c);
    case 'oci':
      return unpackOci(src.path, src.tag, c);
    case 'docker-archive':
      return unpackDockerArchive(src, c);
  }
}
