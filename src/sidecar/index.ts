// The sidecar's public API (for src/index.ts): the JSON-lines protocol behind `raas sidecar`.
export { runSidecar } from './run.js';
export type { RunSidecarOptions } from './run.js';
export { SidecarSession } from './session.js';
export { serveStdio } from './stdio.js';
export type { ServeStdioOptions } from './stdio.js';
export { dapoBackend } from './dapo-backend.js';
export { StderrLog } from './log.js';
export type { SidecarBackend, SidecarCoordinator, SidecarLog } from './types.js';
