/**
 * Rootless sandboxes: `createSandboxRuntime(config)` gives a runtime (bwrap by default, apptainer,
 * or process) that prepares lazily on the first open(), so servers that only run sandbox-less
 * handlers never need bwrap.
 */
import type { Logger } from '../../util/logger.js';
import type { Clock } from '../../util/clock.js';
import { SandboxConfig, type SandboxConfigInput } from '../../protocol/config-sandbox.js';
import { Runtime } from './runtime.js';
import type { SandboxRuntime } from './types.js';

export { SandboxConfig } from '../../protocol/config-sandbox.js';
export type { SandboxConfigInput } from '../../protocol/config-sandbox.js';
export { Runtime } from './runtime.js';
export { describeSandbox } from './describe.js';
export { ManagedSandbox } from './managed.js';
export { LoopbackLeases } from './leases.js';
export { ImageCache } from './image-cache.js';
export { INSIDE } from './bwrap.js';
export { findImage } from './rootfs/detect.js';
export { apptainerArgs } from './apptainer.js';
export type {
  Sandbox,
  SandboxRuntime,
  SandboxSpec,
  BashResult,
  PythonResult,
  EditOp,
  EditResult,
} from './types.js';

/**
 * Creates the sandbox runtime the config names. Nothing happens until the first open(): then it
 * checks the binary and the sandbox user and installs the tool server under `sandbox.root`.
 */
export function createSandboxRuntime(
  config: SandboxConfig | SandboxConfigInput = {},
  opts: { log?: Logger; clock?: Clock } = {},
): SandboxRuntime & Runtime {
  return new Runtime(SandboxConfig.parse(config), opts.log, opts.clock);
}
