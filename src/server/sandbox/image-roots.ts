import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import type { SandboxConfig } from '../../protocol/config-sandbox.js';
import type { Clock } from '../../util/clock.js';
import type { Logger } from '../../util/logger.js';
import { INSIDE } from './bwrap.js';
import { checkImagePaths, imageRootOf } from './image-root.js';
import { detectImage } from './rootfs/detect.js';
import { RootfsStore, type RootfsStats } from './rootfs/index.js';
import { ApptainerImageStrategy } from './runtimes/apptainer-image.js';
import { BwrapImageStrategy, IMAGE_RAAS } from './runtimes/bwrap-image.js';
import type { ImageRoot, PreparedHost, RuntimeStrategy } from './runtimes/types.js';
import type { SandboxSpec } from './types.js';

/**
 * Sandboxes rooted in an image (SandboxSpec.rootImage), for one runtime: the image cache, what a
 * rootImage resolves to (the tree, the workspace, the environment), and the strategy that starts
 * such sandboxes (bwrap over an overlay, or apptainer running the image). Made lazily by the
 * runtime, so a server that never roots a sandbox in an image probes and installs nothing for it.
 */
export class ImageRoots {
  private store_: RootfsStore | undefined;
  private strategy_: RuntimeStrategy | undefined;

  constructor(
    private readonly config: SandboxConfig,
    private readonly prepared: () => PreparedHost,
    private readonly basePath: string,
    private readonly log?: Logger,
    private readonly clock?: Clock,
  ) {}

  /** The cache of unpacked images (created on first use). */
  store(): RootfsStore {
    const p = this.prepared();
    this.store_ ??= new RootfsStore({
      cacheDir: path.resolve(this.config.image_roots.cache_dir ?? path.join(p.root, 'rootfs')),
      budgetBytes: this.config.image_roots.budget_gb * 2 ** 30,
      owner: p.identity ? { uid: p.identity.uid, gid: p.identity.gid } : undefined,
      clock: this.clock,
      log: this.log,
    });
    return this.store_;
  }

  /**
   * The image `want` names (unpacked by the cache where the runtime needs a tree), what runs in it,
   * and `release`, which ends its protection from eviction (the sandbox's close). `binds`: where the
   * spec mounts read-only data inside.
   */
  async rootOf(
    want: NonNullable<SandboxSpec['rootImage']>,
    binds: string[],
    signal?: AbortSignal,
  ): Promise<{ root: ImageRoot; release: () => void }> {
    if (this.config.runtime === 'process') {
      throw new RaasError(
        'bad_request',
        'SandboxSpec.rootImage needs sandbox.runtime "bwrap" or "apptainer" (this server runs "process")',
        {
          retryable: false,
        },
      );
    }
    const store = this.store();
    if (this.config.runtime === 'apptainer') {
      // Apptainer runs a .sif or an unpacked tree itself, with the environment the image declares;
      // the other forms are unpacked by the cache first.
      const src = detectImage(want.ref);
      if (src.form === 'sif' || (src.form === 'directory' && !src.bundleConfig)) {
        const dir = src.form === 'sif' ? src.path : (src.root ?? src.path);
        return {
          root: { dir, workdir: want.workdir ?? INSIDE.workspace, shell: '/bin/sh', env: {}, inherit: true },
          release: () => undefined,
        };
      }
      const img = await store.resolve(want.ref, signal);
      const workdir = want.workdir ?? (img.workdir && img.workdir !== '/' ? img.workdir : INSIDE.workspace);
      return { root: { dir: img.dir, workdir, shell: '/bin/sh', env: img.env, inherit: true }, release: store.retain(img) };
    }
    const img = await store.resolve(want.ref, signal);
    const release = store.retain(img);
    try {
      const root = imageRootOf(img, want.workdir, this.basePath);
      checkImagePaths(want.ref, root.dir, ['/tmp', '/proc', '/dev', IMAGE_RAAS, root.workdir, ...binds]);
      return { root, release };
    } catch (e) {
      release();
      throw e;
    }
  }

  /** Starts unpacking an image in the background (forms Apptainer runs as they are need nothing). */
  prefetch(ref: string): void {
    if (this.config.runtime === 'process') return;
    if (this.config.runtime === 'apptainer') {
      let form: string;
      try {
        form = detectImage(ref).form;
      } catch {
        return;
      }
      if (form === 'sif' || form === 'directory') return;
    }
    this.store().prefetch(ref);
  }

  /** The strategy of image-rooted sandboxes (prepared on first use: the overlay probe, the patched node). */
  strategy(): RuntimeStrategy {
    if (!this.strategy_) {
      const p = this.prepared();
      if (this.config.runtime === 'apptainer') {
        const st = new ApptainerImageStrategy(this.config);
        st.prepare(p.root);
        st.prepareImages(p.root, p.node, p.toolServer);
        this.strategy_ = st;
      } else {
        const st = new BwrapImageStrategy(this.config);
        st.prepareImages(p.root, p.node, p.toolServer, p.identity);
        this.strategy_ = st;
      }
    }
    return this.strategy_;
  }

  /** For /status, once an image was used: the cache's figures and the overlay in force. */
  stats(): { image_cache?: RootfsStats; image_overlay?: string } {
    const overlay = this.strategy_ instanceof BwrapImageStrategy ? this.strategy_.overlayKind() : undefined;
    return { ...(this.store_ ? { image_cache: this.store_.stats() } : {}), ...(overlay ? { image_overlay: overlay } : {}) };
  }

  /** Stops conversions under way (their temporary trees are removed); finished entries stay for the next server. */
  async close(): Promise<void> {
    await this.store_?.close();
  }
}
