// Placeholder: the sandbox issue replaces this file (createSandboxRuntime, SandboxConfig).
export type { Sandbox, SandboxRuntime, SandboxSpec, SandboxLimits, BashOptions, BashResult, PythonOptions, PythonResult, EditOp, EditResult } from './types.js';
