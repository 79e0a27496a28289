// The rootfs store: turns an image reference into a host directory owned by the sandbox user,
// converting once per source into `<cacheDir>/<key>/` and answering later resolves from there.
import fs from 'node:fs';
import path from 'node:path';
import { CancelledError, RaasError, cancellationKind } from '../../../protocol/errors.js';
import { systemClock, type Clock } from '../../../util/clock.js';
import { ownedBy, untraversable } from './access.js';
import {
  entryKey,
  entryPaths,
  inUseElsewhere,
  listEntries,
  markUse,
  orphans,
  readEntry,
  tempName,
  touchEntry,
  writeRecord,
  type EntryRecord,
} from './cache.js';
import { convertSource, directoryMeta } from './convert.js';
import { detectImage, type ImageSource } from './detect.js';
import { flattenTree, removeTree } from './flatten.js';
import { acquireLock, tryLock } from './lock.js';
import { watchDisk } from './guard.js';
import type { Owner, RootfsImage, RootfsStats, RootfsStoreOptions } from './types.js';

/** A conversion under way, shared by every resolve of its key; aborted when its last waiter leaves. */
interface Job {
  promise: Promise<RootfsImage>;
  ac: AbortController;
  waiters: number;
}

/**
 * Resolves image references (unpacked directories, .sif files, OCI layouts, `docker save` tars)
 * to root filesystems. Concurrent resolves of one source share one conversion; servers on one
 * machine share the cache through a lock file per key; least-recently-used entries are evicted
 * past `budgetBytes` after each conversion.
 */
export class RootfsStore {
  private readonly owner: Owner;
  private readonly clock: Clock;
  /** Wall-clock ms at `clock.now() === 0`: last-used stamps come from the injected clock yet compare across processes. */
  private readonly epoch: number;
  private readonly jobs = new Map<string, Job>();
  private readonly pins = new Map<string, number>();
  private readonly removals = new Set<Promise<void>>();
  private readonly counters = { hits: 0, conversions: 0, evictions: 0, in_place: 0 };
  private readonly lifetime = new AbortController();
  private prepared = false;
  private closing: Promise<void> | undefined;

  constructor(private readonly o: RootfsStoreOptions) {
    if (!(o.budgetBytes >= 0)) throw new RaasError('config_invalid', `rootfs budgetBytes must be a number ≥ 0, got ${o.budgetBytes}`);
    this.owner = o.owner ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    this.clock = o.clock ?? systemClock;
    this.epoch = Date.now() - this.clock.now();
  }

  /** Resolves `ref` (a host path, or `path:tag` for OCI layouts and docker archives) to a root filesystem. */
  async resolve(ref: string, signal?: AbortSignal): Promise<RootfsImage> {
    signal?.throwIfAborted();
    if (this.lifetime.signal.aborted) throw new CancelledError('rootfs store closed');
    const src = detectImage(ref);
    if (src.form === 'directory' && this.usableInPlace(src.root!)) {
      this.counters.in_place++;
      return { dir: src.root!, ...directoryMeta(src), form: 'directory', source: src.path };
    }
    this.prepare();
    const key = entryKey(src, this.owner);
    const hit = this.hit(key);
    if (hit) return hit;
    return this.join(this.jobs.get(key) ?? this.start(key, src), signal);
  }

  /** Starts resolving in the background (errors logged, not thrown); a later resolve() joins it. */
  prefetch(ref: string): void {
    if (this.lifetime.signal.aborted) return;
    this.resolve(ref).catch((err: unknown) => {
      if (cancellationKind(err) === undefined) this.o.log?.warn({ ref, err: (err as Error).message }, 'rootfs: prefetch failed');
    });
  }

  /**
   * Protects an entry from eviction until the returned function is called (while a sandbox runs on
   * it: an overlay whose lower layer disappears breaks). Other servers sharing the cache see the
   * use through a marker file holding this process's pid.
   */
  retain(image: RootfsImage): () => void {
    const key = image.key;
    if (key === undefined) return () => undefined;
    const n = (this.pins.get(key) ?? 0) + 1;
    this.pins.set(key, n);
    if (n === 1) markUse(this.o.cacheDir, key, true);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.pins.get(key) ?? 1) - 1;
      if (left > 0) this.pins.set(key, left);
      else {
        this.pins.delete(key);
        markUse(this.o.cacheDir, key, false);
      }
    };
  }

  /** Hits, conversions and evictions of this store; entries and bytes in the cache directory now. */
  stats(): RootfsStats {
    const entries = listEntries(this.o.cacheDir);
    return {
      ...this.counters,
      entries: entries.length,
      bytes: entries.reduce((s, e) => s + e.bytes, 0),
      inflight: this.jobs.size,
    };
  }

  /** Aborts conversions under way (their temporary trees are removed) and waits for background removals. Safe to call twice. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.lifetime.abort(new CancelledError('rootfs store closed'));
      await Promise.allSettled([...this.jobs.values()].map((j) => j.promise));
      await Promise.allSettled([...this.removals]);
    })();
    return this.closing;
  }

  private usableInPlace(root: string): boolean {
    return ownedBy(root, this.owner) && untraversable(root, this.owner) === undefined;
  }

  private prepare(): void {
    if (this.prepared) return;
    const uid = process.getuid?.() ?? 0;
    if (uid !== 0 && (this.owner.uid !== uid || this.owner.gid !== process.getgid?.())) {
      throw new RaasError(
        'sandbox_unavailable',
        `rootfs: files can be given to the sandbox user (uid ${this.owner.uid}) only by root; run the server as root or leave the owner unset`,
        { retryable: false },
      );
    }
    if (fs.mkdirSync(this.o.cacheDir, { recursive: true })) fs.chmodSync(this.o.cacheDir, 0o755);
    const blocked = untraversable(this.o.cacheDir, this.owner);
    if (blocked) {
      throw new RaasError(
        'sandbox_unavailable',
        `rootfs cache ${this.o.cacheDir}: ${blocked} is not searchable by the sandbox user (uid ${this.owner.uid}); chmod o+x ${blocked} or put the cache under /var/tmp`,
        { retryable: false },
      );
    }
    this.prepared = true;
  }

  private wallNow(): number {
    return this.epoch + this.clock.now();
  }

  private image(key: string, rec: EntryRecord): RootfsImage {
    const img: RootfsImage = { dir: entryPaths(this.o.cacheDir, key).rootfs, env: rec.env, form: rec.form, source: rec.source, key };
    if (rec.workdir !== undefined) img.workdir = rec.workdir;
    return img;
  }

  private hit(key: string): RootfsImage | undefined {
    const rec = readEntry(this.o.cacheDir, key);
    if (!rec) return undefined;
    touchEntry(this.o.cacheDir, key, this.wallNow());
    this.counters.hits++;
    return this.image(key, rec);
  }

  private start(key: string, src: ImageSource): Job {
    const ac = new AbortController();
    const onClose = (): void => ac.abort(this.lifetime.signal.reason);
    this.lifetime.signal.addEventListener('abort', onClose, { once: true });
    const promise = this.convertLocked(key, src, ac.signal).finally(() => {
      this.lifetime.signal.removeEventListener('abort', onClose);
      if (this.jobs.get(key) === job) this.jobs.delete(key);
    });
    const job: Job = { ac, waiters: 0, promise };
    // Waiters may all have left; the rejection is theirs to see, not an unhandled one.
    job.promise.catch(() => undefined);
    this.jobs.set(key, job);
    return job;
  }

  /** Waits for `job` under the caller's signal; the last waiter to abort aborts the job and waits for its cleanup. */
  private join(job: Job, signal?: AbortSignal): Promise<RootfsImage> {
    job.waiters++;
    return new Promise<RootfsImage>((resolve, reject) => {
      let gone = false;
      const leave = (): void => {
        gone = true;
        signal?.removeEventListener('abort', onAbort);
        job.waiters--;
      };
      const onAbort = (): void => {
        leave();
        if (job.waiters > 0) return reject(signal!.reason);
        // No one else wants it: stop the conversion, and answer once its temporary tree is gone.
        for (const [k, j] of this.jobs) if (j === job) this.jobs.delete(k);
        job.ac.abort(signal!.reason);
        job.promise.then(
          () => reject(signal!.reason),
          () => reject(signal!.reason),
        );
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      job.promise.then(
        (img) => gone || (leave(), resolve(img)),
        (err: unknown) => gone || (leave(), reject(err)),
      );
    });
  }

  private async convertLocked(key: string, src: ImageSource, signal: AbortSignal): Promise<RootfsImage> {
    const p = entryPaths(this.o.cacheDir, key);
    const release = await acquireLock(p.lock, signal, this.clock);
    try {
      // Another server may have made it while we waited for the lock.
      const done = this.hit(key);
      if (done) return done;
      if (fs.existsSync(p.dir)) {
        this.o.log?.warn({ key, dir: p.dir }, 'rootfs: removing a partial cache entry');
        await removeTree(p.dir);
      }
      for (const o of orphans(this.o.cacheDir)) this.removeLater(o);
      const rec = await this.build(key, src, signal);
      await this.evict(key);
      return this.image(key, rec);
    } finally {
      release();
    }
  }

  private async build(key: string, src: ImageSource, outer: AbortSignal): Promise<EntryRecord> {
    const p = entryPaths(this.o.cacheDir, key);
    const tmp = tempName(this.o.cacheDir, key);
    const started = this.clock.now();
    this.o.log?.info({ source: src.path, form: src.form, key }, 'rootfs: converting image');
    // Root-only until flattened: the converters run as root and may write setuid-root files and
    // device nodes of the image, which no other user may reach before the flatten pass removes them.
    fs.mkdirSync(tmp, { mode: 0o700 });
    fs.chmodSync(tmp, 0o700);
    const guard = new AbortController();
    const signal = AbortSignal.any([outer, guard.signal]);
    // Converters stage the image beside the tree they unpack (a layout copy, a bundle): twice the
    // budget stops a runaway image while it unpacks; the tree itself is held to the budget below.
    const unwatch = watchDisk({
      dir: tmp,
      limitBytes: 2 * this.o.budgetBytes,
      what: `image ${src.path}`,
      stop: (reason) => guard.abort(reason),
      clock: this.clock,
    });
    try {
      const meta = await convertSource(src, { tmp, signal, log: this.o.log });
      const flat = await flattenTree(path.join(tmp, 'rootfs'), this.owner, signal);
      if (flat.bytes > this.o.budgetBytes) {
        throw new RaasError(
          'invalid_instance',
          `image ${src.path} unpacks to ${Math.round(flat.bytes / 2 ** 20)} MiB, more than the image cache's whole budget (sandbox.image_roots.budget_gb): raise it, or use a smaller image`,
          { retryable: false },
        );
      }
      const rec: EntryRecord = {
        env: meta.env,
        ...(meta.workdir !== undefined ? { workdir: meta.workdir } : {}),
        bytes: flat.bytes,
        form: src.form,
        source: src.path,
        created: new Date(this.wallNow()).toISOString(),
        convert_ms: Math.round(this.clock.now() - started),
      };
      writeRecord(tmp, rec);
      signal.throwIfAborted();
      fs.chmodSync(tmp, 0o755);
      try {
        fs.renameSync(tmp, p.dir);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        // Another process won a lock race and renamed first: its entry is as good as ours.
        const theirs = code === 'ENOTEMPTY' || code === 'EEXIST' ? readEntry(this.o.cacheDir, key) : undefined;
        if (!theirs) throw e;
        this.counters.hits++;
        return theirs;
      }
      touchEntry(this.o.cacheDir, key, this.wallNow());
      this.counters.conversions++;
      this.o.log?.info(
        {
          source: src.path,
          key,
          bytes: flat.bytes,
          devices_dropped: flat.devices,
          setid_cleared: flat.setid,
          ms: rec.convert_ms,
        },
        'rootfs: image ready',
      );
      return rec;
    } catch (e) {
      // The guard's reason (too large, disk full) says more than the converter's "killed".
      if (guard.signal.aborted && !outer.aborted) throw guard.signal.reason;
      throw e;
    } finally {
      unwatch();
      if (fs.existsSync(tmp)) await removeTree(tmp);
    }
  }

  /** Evicts least-recently-used entries until the cache fits its budget; never `keep`, an entry being resolved or a retained one. */
  private async evict(keep: string): Promise<void> {
    const entries = listEntries(this.o.cacheDir).sort((a, b) => a.lastUsed - b.lastUsed);
    let total = entries.reduce((s, e) => s + e.bytes, 0);
    const protect = new Set([keep, ...this.jobs.keys(), ...this.pins.keys()]);
    for (const e of entries) {
      if (total <= this.o.budgetBytes) break;
      if (protect.has(e.key) || inUseElsewhere(this.o.cacheDir, e.key)) continue;
      const p = entryPaths(this.o.cacheDir, e.key);
      // An entry another server is redoing right now is skipped, not waited for.
      if (!tryLock(p.lock)) continue;
      try {
        if (!readEntry(this.o.cacheDir, e.key)) continue;
        // Renamed away at once, so no reader ever sees half an entry; removed in the background.
        const gone = tempName(this.o.cacheDir, e.key, 'evict');
        fs.renameSync(p.dir, gone);
        this.removeLater(gone);
        total -= e.bytes;
        this.counters.evictions++;
        this.o.log?.info({ key: e.key, bytes: e.bytes }, 'rootfs: evicted cache entry');
      } finally {
        fs.rmSync(p.lock, { force: true });
      }
    }
    if (total > this.o.budgetBytes) {
      this.o.log?.warn({ bytes: total, budget: this.o.budgetBytes }, 'rootfs: cache stays over its budget (entries in use)');
    }
  }

  private removeLater(dir: string): void {
    const r = removeTree(dir)
      .catch((err: unknown) => this.o.log?.warn({ dir, err: (err as Error).message }, 'rootfs: cannot remove'))
      .finally(() => this.removals.delete(r));
    this.removals.add(r);
  }
}
