import type { Clock } from '../../../util/clock.js';
import type { Logger } from '../../../util/logger.js';

/** How an image reached us: detected by content (magic bytes, marker files), not by name. */
export type RootfsForm = 'directory' | 'sif' | 'oci' | 'docker-archive';

/** A uid/gid pair: the sandbox user every file of a root filesystem belongs to. */
export interface Owner {
  uid: number;
  gid: number;
}

/** A root filesystem on the host, ready for the launcher to bind as a sandbox's `/`. */
export interface RootfsImage {
  /** Host directory of the unpacked root filesystem (every file owned by `owner`, so the sandbox's mapped root owns it). */
  dir: string;
  /** The image's environment (OCI config Env; Apptainer's /.singularity.d/env/*.sh exports), name → value. */
  env: Record<string, string>;
  /** The image's working directory (OCI WorkingDir), if any. */
  workdir?: string;
  form: RootfsForm;
  /** The reference it was resolved from (host path). */
  source: string;
  /** Cache key (undefined when a directory is used in place). */
  key?: string;
}

/** Options of a RootfsStore. */
export interface RootfsStoreOptions {
  /** The cache directory, e.g. `<sandbox root>/rootfs`; created 0755 so the sandbox user can traverse it. */
  cacheDir: string;
  /** Disk budget of the cache: least-recently-used entries are evicted beyond it after each conversion. */
  budgetBytes: number;
  /** The sandbox user when the server runs as root; undefined → the current user. */
  owner?: Owner;
  clock?: Clock;
  log?: Logger;
}

/** Counters of a store (this process) and the size of its cache (all processes). */
export interface RootfsStats {
  /** Resolves answered from a complete cache entry. */
  hits: number;
  /** Entries created by this process. */
  conversions: number;
  /** Entries removed by this process to stay under the budget. */
  evictions: number;
  /** Resolves answered with a directory used in place. */
  in_place: number;
  /** Complete entries in the cache directory now. */
  entries: number;
  /** Their size on disk (the sum of their complete.json `bytes`). */
  bytes: number;
  /** Conversions under way in this process. */
  inflight: number;
}
