import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import { sleep, systemClock, type Clock } from '../../util/clock.js';
import { RAAS_VERSION } from '../../version.js';
import type { Logger } from '../../util/logger.js';
import type { ImageDefinition, SandboxConfig } from '../../protocol/config-sandbox.js';
import type { Sandbox, SandboxSpec } from './types.js';
import { apptainerBuildArgs, DEFAULT_DEFINITION, renderDefinition } from './apptainer.js';

/** What the cache needs from its runtime: the config (image definitions) and sandboxes to build in. */
export interface ImageBuilderRuntime {
  readonly config: SandboxConfig;
  /** A sandbox whose workspace is the host directory `dir` (the image being built). */
  openBuild(spec: SandboxSpec, dir: string, signal?: AbortSignal): Promise<Sandbox>;
}

/** Counters tests and operators read: cache hits and builds per image name. */
export interface ImageStats {
  hits: number;
  builds: number;
}

const BUILD_TIMEOUT_S = 1800;

/**
 * The runtime builder: an image is a template (setup script) plus build inputs, built by running
 * the script inside a bwrap sandbox and kept as a directory tree under `<root>/<name>-<key>`.
 * Modes: `scratch` rebuilds every time; `versioned` reuses while the base image, the template
 * version and the framework version are unchanged; `lock` reuses while the lockfile's hash is.
 * A lock file per key lets one process build while others wait.
 */
export class ImageCache {
  readonly stats = new Map<string, ImageStats>();
  private readonly inflight = new Map<string, Promise<string>>();

  constructor(private readonly o: { root: string; runtime: ImageBuilderRuntime; log?: Logger; frameworkVersion?: string; clock?: Clock }) {}

  private def(name: string): ImageDefinition {
    const d = this.o.runtime.config.images[name];
    if (!d)
      throw new RaasError('bad_request', `SandboxSpec.image "${name}" is not defined: add it under sandbox.images in the server config`, {
        retryable: false,
      });
    return d;
  }

  /** The cache key of an image: what must change for it to be rebuilt (undefined for scratch). */
  key(name: string, seen: string[] = []): string | undefined {
    const d = this.def(name);
    if (seen.includes(name))
      throw new RaasError('bad_request', `sandbox.images: base cycle ${[...seen, name].join(' → ')}`, { retryable: false });
    const h = createHash('sha256').update(name);
    if (d.mode === 'scratch') return undefined;
    if (d.mode === 'lock') {
      if (!d.lockfile || d.files[d.lockfile] === undefined) {
        throw new RaasError('bad_request', `sandbox.images.${name}: lock mode needs lockfile naming one of its files`, {
          retryable: false,
        });
      }
      h.update('lock').update(d.files[d.lockfile]);
    } else {
      h.update('versioned')
        .update(d.version)
        .update(this.o.frameworkVersion ?? RAAS_VERSION);
    }
    if (d.base) h.update('base').update(this.key(d.base, [...seen, name]) ?? 'scratch');
    return h.digest('hex').slice(0, 16);
  }

  private stat(name: string): ImageStats {
    let s = this.stats.get(name);
    if (!s) this.stats.set(name, (s = { hits: 0, builds: 0 }));
    return s;
  }

  /** The directory of a built image, building it when the key has no tree yet. */
  resolve(name: string, signal?: AbortSignal): Promise<string> {
    const key = this.key(name);
    const dir = path.join(this.o.root, `${name}-${key ?? 'scratch-' + randomBytes(4).toString('hex')}`);
    if (key && fs.existsSync(dir)) {
      this.stat(name).hits++;
      return Promise.resolve(dir);
    }
    let p = this.inflight.get(dir);
    if (!p) {
      p = this.buildLocked(name, dir, key !== undefined, signal).finally(() => this.inflight.delete(dir));
      this.inflight.set(dir, p);
    }
    return p;
  }

  private async buildLocked(name: string, dir: string, cacheable: boolean, signal?: AbortSignal): Promise<string> {
    fs.mkdirSync(this.o.root, { recursive: true, mode: 0o755 });
    const lock = `${dir}.lock`;
    for (;;) {
      try {
        fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        if (!holderAlive(lock)) fs.rmSync(lock, { force: true });
        else await sleep(100, signal, this.o.clock);
      }
    }
    try {
      if (cacheable && fs.existsSync(dir)) {
        this.stat(name).hits++;
        return dir;
      }
      await this.build(name, dir, signal);
      this.stat(name).builds++;
      return dir;
    } finally {
      fs.rmSync(lock, { force: true });
    }
  }

  private async build(name: string, dir: string, signal?: AbortSignal): Promise<void> {
    const d = this.def(name);
    const started = (this.o.clock ?? systemClock).now();
    this.o.log?.info({ image: name, mode: d.mode }, 'building sandbox image');
    // The script runs as a file under its own bash, so `exit` or `set -e` end the script, not the tool shell.
    const script = '.raas-image-setup.sh';
    // The build binds its output directory; the host never reads the tree, it only renames it.
    const tmp = `${dir}.tmp-${process.pid}`;
    fs.rmSync(tmp, { recursive: true, force: true });
    const sb = await this.o.runtime.openBuild(
      { image: d.base, files: { ...d.files, [script]: d.setup }, network: d.network, tools: ['bash'] },
      tmp,
      signal,
    );
    let ok = false;
    try {
      const r = await sb.bash(`bash ${script}; rc=$?; rm -f ${script}; (exit $rc)`, { timeout_s: BUILD_TIMEOUT_S, signal });
      if (r.exit_code !== 0) {
        throw new RaasError(
          'sandbox_error',
          `image "${name}": setup script failed (exit ${r.exit_code}${r.timed_out ? ', timed out' : ''}):\n${r.output.slice(-2000)}`,
        );
      }
      ok = true;
    } finally {
      await sb.close();
      if (!ok) fs.rmSync(tmp, { recursive: true, force: true });
    }
    fs.writeFileSync(
      `${dir}.json`,
      JSON.stringify({
        name,
        mode: d.mode,
        built_at: new Date().toISOString(),
        build_ms: Math.round((this.o.clock ?? systemClock).now() - started),
      }) + '\n',
    );
    fs.renameSync(tmp, dir);
  }

  /** The `apptainer build` command line and rendered definition for an image (.sif under the cache root). */
  apptainerBuild(name: string, base = 'debian:12-slim'): { argv: string[]; sif: string; definition: string } {
    const d = this.def(name);
    const sif = path.join(this.o.root, `${name}-${this.key(name) ?? 'scratch'}.sif`);
    const setup = d.setup
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n');
    const definition = renderDefinition(d.definition ?? DEFAULT_DEFINITION, { base, setup });
    return { argv: apptainerBuildArgs(sif, `${sif}.def`, this.o.runtime.config.apptainer.fakeroot), sif, definition };
  }
}

function holderAlive(lock: string): boolean {
  try {
    process.kill(Number(fs.readFileSync(lock, 'utf8')), 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
