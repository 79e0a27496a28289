/**
 * Root filesystems for sandboxes rooted in a task's own image: `RootfsStore.resolve(ref)` turns an
 * unpacked directory, a .sif file, an OCI layout or a `docker save` tar into a host directory owned
 * by the sandbox user, cached under `cacheDir`; `findImage` locates an instance's image by name.
 */
export { RootfsStore } from './store.js';
export type { Owner, RootfsStats } from './types.js';
