import type { SandboxConfig } from '../../../protocol/config-sandbox.js';
import type { ToolServerOptions } from '../../tools/protocol.js';
import type { CgroupDescription, CgroupOptions } from '../cgroup.js';
import type { SandboxIdentity } from '../host.js';
import type { LaunchPlan } from '../managed.js';
import type { SandboxSpec } from '../types.js';
import type { SandboxDirs } from '../workspace.js';

/** What the runtime prepared once, shared by every sandbox it starts. */
export interface PreparedHost {
  root: string;
  /** Host directory of the installed tool server. */
  toolServer: string;
  identity: SandboxIdentity | undefined;
  binary: string;
  node: string;
}

/** Where the tool server of one sandbox finds things, as seen from inside it. */
export interface ToolServerView {
  socket: string;
  workspace: string;
  tmp_dir: string;
  /** HOME of the tool server's own node process. */
  home: string;
  /** The image tree to seed the workspace from, when there is one. */
  seed_dir?: string;
  conn_fd?: number;
  disk_mb?: number;
}

/** The image a sandbox is rooted in, resolved on the host: its tree and what runs in it. */
export interface ImageRoot {
  /** Host directory of the image's root filesystem (read-only lower layer). */
  dir: string;
  /** The workspace inside (the spec's, the image's WorkingDir, or /workspace). */
  workdir: string;
  /** The shell that applies limits (the image's /bin/bash, else /bin/sh). */
  shell: string;
  /** The image's python interpreter, when it has one. */
  python?: string;
  /** The image's environment (OCI Env, the activated conda environment). */
  env: Record<string, string>;
  /** The image has something at /workspace (else an image-rooted sandbox links /workspace to `workdir`). */
  hasWorkspace?: boolean;
  /** The runtime applies the image's environment inside (Apptainer), and the tool server finds the rest (image_env: inherit). */
  inherit?: boolean;
}

/** Everything one launch needs: the shared preparation, the sandbox's directories, its spec. */
export interface LaunchInput {
  prepared: PreparedHost;
  dirs: SandboxDirs;
  spec: SandboxSpec;
  /** The tool server's options (serialised onto its command line). */
  options: ToolServerOptions;
  /** Environment of the tool server's node process. */
  nodeEnv: Record<string, string>;
  /** Host path of the tool server's socket (runtimes that listen on a path). */
  socket: string;
  /** Host directory of the image the workspace starts from. */
  seed?: string;
  /** The image the sandbox is rooted in (image-rooted strategies only). */
  root?: ImageRoot;
  /** The tmpfs size of /tmp, from the sandbox's limits. */
  tmpSizeMb: number;
  /** PATH of every process we start. */
  path: string;
}

/** What a runtime reports of itself in /status (the isolation it gives). */
export interface RuntimeDescription {
  user: string;
  workspace: Record<string, unknown>;
  seccomp: Record<string, unknown>;
  nested_user_namespaces: string;
  tool_server: string;
  network: Record<string, string>;
  host_channel: string;
  /** The cgroup mode this config gets here, found without creating anything. */
  limits: CgroupDescription;
}

/**
 * One way of running sandboxes (bwrap, apptainer, the bare process). The runtime's shared
 * machinery (workspaces, leases, the warm pool, images, cgroups, the close sequence) asks the
 * strategy every question whose answer depends on the isolation tool, so a new way of running
 * sandboxes is a new strategy, not new branches.
 */
export interface RuntimeStrategy {
  readonly kind: SandboxConfig['runtime'];
  /** False for the process runtime: tools run on the host as they are. */
  readonly isolated: boolean;
  /** The workspace is a host directory created and seeded before start (else private to the sandbox). */
  readonly hostWorkspace: boolean;
  /** Without a host workspace, the tool server still listens on a socket file in a host directory (apptainer in an image). */
  readonly socketDir?: boolean;
  /** Sandboxes can be started ahead of their job (a warm pool). */
  readonly poolable: boolean;
  /** An image is laid into every sandbox at start (else only into image builds). */
  readonly seedsImages: boolean;
  /** The binary that starts sandboxes and the user they run as; throws `sandbox_unavailable`. */
  locate(): { binary: string; identity: SandboxIdentity | undefined };
  /** How the tool server is installed (bwrap: with an execute-only copy of node). */
  installOptions(node: string): { node?: string };
  /** Runtime-specific preparation under the sandbox root (seccomp programs, profiles). */
  prepare(root: string): void;
  /** How this runtime's sandboxes get cgroups. */
  cgroupOptions(identity: SandboxIdentity | undefined): CgroupOptions;
  /** The sandbox shares the host's network (and then gets its own loopback address). */
  sharesHostNetwork(spec: SandboxSpec): boolean;
  /** Checks that what the spec asks for can start here (bwrap: the network helper); throws with the fix. */
  check(spec: SandboxSpec, identity: SandboxIdentity | undefined): void;
  /** Where the tool server finds its socket, workspace and scratch space. */
  view(dirs: SandboxDirs, seed?: string, root?: ImageRoot): ToolServerView;
  /** The command line that starts one sandbox's tool server. */
  launch(input: LaunchInput): LaunchPlan;
  /** The isolation this runtime gives, for /status and the start log. */
  describe(): RuntimeDescription;
}
