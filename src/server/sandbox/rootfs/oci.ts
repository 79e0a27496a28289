// OCI image layouts (image-spec image-layout.md): the tag umoci unpacks, and the image config's
// Env and WorkingDir, read from the blobs (umoci's config.json adds runtime defaults such as TERM).
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { RaasError } from '../../../protocol/errors.js';
import { ociEnv } from './env.js';
import { hostGoArch } from './sif.js';

const REF_NAME = 'org.opencontainers.image.ref.name';
const INDEX_TYPES = new Set(['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json']);

const Descriptor = z.object({
  mediaType: z.string().optional(),
  digest: z.string(),
  annotations: z.record(z.string(), z.string()).optional(),
  platform: z.object({ architecture: z.string().optional(), os: z.string().optional() }).optional(),
});
type Descriptor = z.infer<typeof Descriptor>;
const Index = z.object({ manifests: z.array(Descriptor) });
const Manifest = z.object({ config: Descriptor });
const ImageConfig = z.object({
  config: z.object({ Env: z.array(z.string()).nullish(), WorkingDir: z.string().nullish() }).nullish(),
});

function bad(layout: string, why: string): RaasError {
  return new RaasError('invalid_instance', `rootfs image ${layout}: ${why}`, { retryable: false });
}

/** True when `dir` holds an OCI image layout (an `oci-layout` file and `index.json`). */
export function isOciLayout(dir: string): boolean {
  return fs.existsSync(path.join(dir, 'oci-layout')) && fs.existsSync(path.join(dir, 'index.json'));
}

function readJson<T>(file: string, schema: z.ZodType<T>, layout: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw bad(layout, `cannot read ${path.relative(layout, file)}: ${(e as Error).message}`);
  }
  const r = schema.safeParse(raw);
  if (!r.success) throw bad(layout, `${path.relative(layout, file)} is not valid: ${r.error.issues[0]?.message}`);
  return r.data;
}

function blobPath(layout: string, digest: string): string {
  const m = /^(sha256|sha512):([a-f0-9]{64,128})$/.exec(digest);
  if (!m) throw bad(layout, `unsupported digest "${digest}"`);
  return path.join(layout, 'blobs', m[1], m[2]);
}

function tags(index: z.infer<typeof Index>): string[] {
  return index.manifests.map((m) => m.annotations?.[REF_NAME]).filter((t): t is string => t !== undefined);
}

/**
 * The tag to unpack: `tag` when given (it must exist), else the single manifest's tag, else
 * `latest`. Throws naming the tags there are when the choice is ambiguous.
 */
export function selectTag(layout: string, tag?: string): string {
  const index = readJson(path.join(layout, 'index.json'), Index, layout);
  const all = tags(index);
  if (tag !== undefined) {
    if (!all.includes(tag)) throw bad(layout, `no tag "${tag}" in the OCI layout (tags: ${all.join(', ') || 'none'})`);
    return tag;
  }
  if (index.manifests.length === 1) {
    if (all.length === 1) return all[0];
    throw bad(layout, `the OCI layout's manifest has no ${REF_NAME} annotation; tag it: umoci tag --image ${layout}@<digest> latest`);
  }
  if (all.includes('latest')) return 'latest';
  throw bad(
    layout,
    `the OCI layout has ${index.manifests.length} manifests (tags: ${all.join(', ') || 'none'}); name one as ${layout}:<tag>`,
  );
}

/** The Env and WorkingDir of the image tagged `tag` (a multi-platform index picks this host's linux image). */
export function imageConfig(layout: string, tag: string): { env: Record<string, string>; workdir?: string } {
  const index = readJson(path.join(layout, 'index.json'), Index, layout);
  let d: Descriptor | undefined = index.manifests.find((m) => m.annotations?.[REF_NAME] === tag);
  if (!d) throw bad(layout, `no tag "${tag}" in the OCI layout`);
  for (let depth = 0; d.mediaType !== undefined && INDEX_TYPES.has(d.mediaType); depth++) {
    if (depth > 4) throw bad(layout, 'image indexes nest too deep');
    const inner: Descriptor[] = readJson(blobPath(layout, d.digest), Index, layout).manifests;
    d = inner.find((m) => m.platform?.os === 'linux' && m.platform.architecture === hostGoArch()) ?? inner[0];
    if (!d) throw bad(layout, `the index for tag "${tag}" lists no manifest`);
  }
  const manifest = readJson(blobPath(layout, d.digest), Manifest, layout);
  const cfg = readJson(blobPath(layout, manifest.config.digest), ImageConfig, layout).config;
  return { env: ociEnv(cfg?.Env ?? []), workdir: cfg?.WorkingDir || undefined };
}
