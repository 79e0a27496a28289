/**
 * The sandbox contract. Sandboxes and tools know nothing of jobs or tasks: handlers open a sandbox
 * through `ctx.sandboxes.open(spec)` and talk to its tool server through this interface.
 */

import type { BashAnswer, EditAnswer, EditOp, ExecAnswer, PythonAnswer } from '../tools/protocol.js';

/** What `bash` answers (the tool server's wire type, src/server/tools/protocol.ts). */
export type BashResult = BashAnswer;
/** What `python` answers. */
export type PythonResult = PythonAnswer;
/** What the editor answers. */
export type EditResult = EditAnswer;
/** What `exec` answers: the exit status comes from the process itself, never from its output. */
export type ExecResult = ExecAnswer;
export type { EditOp };

/** What a handler asks for when it opens a sandbox. */
export interface SandboxSpec {
  /** Image name from the image cache (a prepared directory tree for bwrap, a .sif for apptainer). */
  image?: string;
  /**
   * Root the sandbox in this image instead of the host's userland (bwrap): a host path from the
   * server config (never client input) to an unpacked root directory, a `.sif`, an OCI image layout
   * or a `docker save` archive. The sandbox sees the image's files under a private writable overlay,
   * with the image's environment; `workdir` (else the image's WorkingDir, else /workspace) is the
   * workspace.
   */
  rootImage?: { ref: string; workdir?: string };
  /** Files written into the workspace before the tool server starts (path relative to the workspace → content). */
  files?: Record<string, string>;
  /** Network access; none unless a task asks. */
  network?: boolean;
  /** Extra environment for bash and python (the host's environment is never passed). */
  env?: Record<string, string>;
  /** Which tools the tool server starts (default all: bash, python, editor). */
  tools?: Array<'bash' | 'python' | 'editor'>;
  /** Resource limits for the bash and python children. */
  limits?: SandboxLimits;
  /**
   * Host paths bound read-only into the sandbox (bwrap, apptainer): operator-provided data such as a
   * repository cache. Handlers must only pass paths from the server config, never client input.
   */
  readOnly?: Array<{ host: string; inside: string }>;
}

/** Per-sandbox resource limits; each key overrides the server config's `sandbox.limits`. */
interface SandboxLimits {
  memory_mb?: number;
  cpu_s?: number;
  processes?: number;
  file_size_mb?: number;
  tmp_size_mb?: number;
  /** CPUs' worth of time (cgroup quota). */
  cpus?: number;
}

export interface BashOptions {
  /** Hard timeout; sends Ctrl-C and answers `timed_out` with the output so far. */
  timeout_s?: number;
  /** Answer (without interrupting) once output has not changed for this long. */
  no_change_timeout_s?: number;
  /** Send `command` as keystrokes to the running program instead of as a new command. */
  is_input?: boolean;
  signal?: AbortSignal;
}

export interface PythonOptions {
  timeout_s?: number;
  signal?: AbortSignal;
}

export interface ExecOptions {
  /** Text written to the process's stdin (then closed). */
  stdin?: string;
  /** Working directory inside the sandbox (default the workspace). */
  cwd?: string;
  /** Extra environment on top of the sandbox's. */
  env?: Record<string, string>;
  /** Kills the process group after this long (default 600 s). */
  timeout_s?: number;
  /** Bytes kept of stdout and of stderr each (default 16 MiB). */
  maxOutputBytes?: number;
  signal?: AbortSignal;
}

export interface ReadFileOptions {
  /** Refuse files larger than this (default sandbox.max_read_bytes, 16 MiB) with a `sandbox_limit` error. */
  maxBytes?: number;
  signal?: AbortSignal;
}

/** An open sandbox with its tool server. Every call takes an AbortSignal; close() is safe twice. */
export interface Sandbox {
  readonly id: string;
  /** Host pid of the sandbox's outer process (bwrap, apptainer, the tool server), for process-table checks. */
  readonly pid?: number;
  /**
   * The workspace as the sandbox's tools see it (`/workspace` for bwrap and apptainer; a host
   * directory only for the unisolated `process` runtime). The host never opens paths inside it:
   * read files with readFile(), which reads them through the sandbox.
   */
  readonly workspace: string;
  /**
   * The sandbox isolates (bwrap, apptainer): SandboxSpec.readOnly binds are visible inside. False for
   * the `process` runtime, which sees host paths as they are.
   */
  readonly isolated?: boolean;
  /** Unique loopback address when the runtime shares the host network (else undefined). */
  readonly address?: string;
  bash(command: string, opts?: BashOptions): Promise<BashResult>;
  python(code: string, opts?: PythonOptions): Promise<PythonResult>;
  edit(op: EditOp, opts?: { signal?: AbortSignal }): Promise<EditResult>;
  /**
   * Reads a file through the sandbox, as the sandbox user: symlinks resolve in the sandbox's view,
   * only regular files are read (a FIFO or device is refused without blocking), and a file over
   * maxBytes is refused with a `sandbox_limit` error. Relative paths start at the workspace.
   */
  readFile(path: string, opts?: ReadFileOptions): Promise<Buffer>;
  /**
   * Runs a fresh process inside the sandbox, outside the agent's persistent shell (no functions,
   * aliases or variables the agent set), under the sandbox's limits. For grading and captures.
   */
  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult>;
  close(): Promise<void>;
}

/** Opens sandboxes of one runtime (bwrap, apptainer, process). */
export interface SandboxRuntime {
  readonly kind: 'bwrap' | 'apptainer' | 'process';
  open(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox>;
  /** Closes every sandbox this runtime opened. */
  close(): Promise<void>;
}
