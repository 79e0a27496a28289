import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** The bundled `configs/data` (from src/protocol under tsx, or from dist/src/protocol once built). */
function bundledDataDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (const up of ['../..', '../../..']) {
    const dir = path.resolve(here, up, 'configs/data');
    if (existsSync(dir)) return dir;
  }
  return path.resolve(here, '../../configs/data');
}

/** Resource limits of the bash and python children (defaults; a SandboxSpec may lower or raise them). */
const SandboxLimitsConfig = z.strictObject({
  /** Address-space limit (ulimit -v) of bash, python and what they start. Never applied to Node. */
  memory_mb: z.number().int().positive().default(4096),
  /** CPU seconds per process (ulimit -t). */
  cpu_s: z.number().int().positive().default(3600),
  /** Processes of the sandbox (ulimit -u, counted inside its own user namespace). */
  processes: z.number().int().positive().default(256),
  /** Largest file a process may write (ulimit -f). */
  file_size_mb: z.number().int().positive().default(4096),
  /** Size of the sandbox's private /tmp (bwrap tmpfs). */
  tmp_size_mb: z.number().int().positive().default(512),
  /** CPUs' worth of time the sandbox may use (cgroup CPU quota; 0.5 = half a core); 0 = unlimited. */
  cpus: z.number().nonnegative().default(1),
});

/** How an image is reused: always rebuilt, reused per base + framework version, or per lockfile hash. */
const ImageMode = z.enum(['scratch', 'versioned', 'lock']);

/** An image: a template (setup script) plus build inputs; built inside a sandbox, cached under `<root>/images`. */
export const ImageDefinition = z.strictObject({
  /** Bash script run inside a bwrap sandbox with the image directory as /workspace. */
  setup: z.string().min(1),
  /** Files written into the image directory before the script runs (path → content). */
  files: z.record(z.string(), z.string()).default({}),
  mode: ImageMode.default('versioned'),
  /** Template version for `versioned` mode: bump it to rebuild (with the base image and the framework version). */
  version: z.string().default('1'),
  /** Base image: another image name; its tree is the starting point of this one. */
  base: z.string().optional(),
  /** For `lock` mode: which of `files` is the dependency lockfile. */
  lockfile: z.string().optional(),
  /** Network during the build (off by default). */
  network: z.boolean().default(false),
  /** For apptainer: the definition template (`{{base}}` and `{{setup}}` are replaced). */
  definition: z.string().optional(),
});

/** Apptainer (Singularity) runtime settings for HPC clusters. */
const ApptainerConfig = z.strictObject({
  /** Binary; by default the first of `apptainer`, `singularity` on PATH. */
  binary: z.string().optional(),
  /** The .sif image sandboxes run from (must contain node and bash); an image name from `images` also works. */
  image: z.string().optional(),
  /** `--fakeroot` (needs subuid mappings on the cluster). */
  fakeroot: z.boolean().default(false),
  /** Extra arguments placed before the image. */
  extra_args: z.array(z.string()).default([]),
  /** `--security seccomp:<profile>` with raas's deny list (Docker format) and --no-privs. */
  seccomp: z.boolean().default(true),
  /** `--userns`: a user namespace even where the setuid starter is installed. */
  userns: z.boolean().default(false),
});

/**
 * The `sandbox:` section of the server config. Every field has a default; the runtime prepares
 * lazily, on the first open().
 */
export const SandboxConfig = z.strictObject({
  runtime: z.enum(['bwrap', 'apptainer', 'process']).default('bwrap'),
  /** The unprivileged user bwrap runs as when the server runs as root (created by scripts/setup.sh). */
  user: z.string().min(1).default('raas-sandbox'),
  /** Tool server code and workspaces; default /var/tmp/raas as root, `<tmpdir>/raas-<uid>` otherwise. */
  root: z.string().min(1).optional(),
  /** bubblewrap binary (looked up on PATH). */
  bwrap: z.string().min(1).default('bwrap'),
  /** Node binary that runs the tool server; default the server's own. */
  node: z.string().min(1).optional(),
  /** Python interpreter of the python tool (a pyenv shim on PATH can be slow; the system one is not). */
  python: z.string().min(1).default('/usr/bin/python3'),
  /** `pty` (default) or `tmux`, the OpenHands baseline kept for benchmarks and ablations. */
  bash_backend: z.enum(['pty', 'tmux']).default('pty'),
  /** Poll interval of the tmux baseline (OpenHands: 500 ms). */
  tmux_poll_ms: z.number().int().positive().default(500),
  limits: SandboxLimitsConfig.default(SandboxLimitsConfig.parse({})),
  /** Characters of output per tool answer (head and tail kept, the cut marked). */
  output_cap: z.number().int().positive().default(30_000),
  /** Largest command, code or file text accepted by the tool server. */
  max_input_bytes: z
    .number()
    .int()
    .positive()
    .default(1 << 20),
  /** Seconds from spawn until the tool server must answer. */
  start_timeout_s: z.number().positive().default(20),
  /** Grace period of each close step (graceful stop, SIGTERM) before the next one. */
  close_grace_ms: z.number().int().nonnegative().default(500),
  /** Environment given to bash and python in every sandbox (on top of PATH, HOME, TERM, HISTFILE). */
  env: z.record(z.string(), z.string()).default({}),
  /** Extra host paths bound read-only at the same place (bwrap). */
  ro_binds: z.array(z.string()).default([]),
  apptainer: ApptainerConfig.default(ApptainerConfig.parse({})),
  /**
   * Image roots: sandboxes rooted in a task's own image (a root directory, a .sif, an OCI layout or a
   * `docker save` archive), converted once into a cache of unpacked trees owned by the sandbox user.
   */
  image_roots: z
    .strictObject({
      /** Cache of unpacked image trees; default `<root>/rootfs`. */
      cache_dir: z.string().optional(),
      /** Disk budget of the cache; the least recently used trees are removed beyond it. */
      budget_gb: z.number().positive().default(50),
      /**
       * The writable layer over an image: `kernel` overlayfs in the sandbox's user namespace (Linux 6.6
       * or later, for user xattrs on tmpfs), `fuse` (fuse-overlayfs, older kernels, slower), `auto`
       * the kernel's where it works.
       */
      overlay: z.enum(['auto', 'kernel', 'fuse']).default('auto'),
    })
    .default({ budget_gb: 50, overlay: 'auto' }),
  /** Loopback leases (127.x.y.z) for sandboxes that share the host network. */
  leases: z
    .strictObject({
      ttl_s: z
        .number()
        .positive()
        .default(6 * 3600),
      /** Lock and lease file; default `<root>/leases.json`. */
      file: z.string().optional(),
    })
    .default({ ttl_s: 6 * 3600 }),
  /** Named images for SandboxSpec.image. */
  images: z.record(z.string(), ImageDefinition).default({}),
  /**
   * Sandboxes started ahead of demand (bwrap, apptainer): open() of a spec without network takes one
   * and configures it, so INIT does not wait for a sandbox start. 0 turns the pool off.
   */
  pool_size: z.number().int().nonnegative().max(1024).default(0),
  /**
   * Size of each sandbox's workspace in MB: a tmpfs private to the sandbox (bwrap), so the host disk
   * never grows with what a task writes. A task that fills it ends with a `sandbox_limit` error.
   */
  disk_mb: z.number().int().positive().default(2048),
  /**
   * Largest file the server reads out of a sandbox (a solution, a patch, a test output), in bytes.
   * Reads go through the sandbox as the sandbox user; a larger file ends the job with `sandbox_limit`.
   */
  max_read_bytes: z
    .number()
    .int()
    .positive()
    .default(16 << 20),
  /**
   * Host directories that client-supplied paths (instance.tarball) may name; realpath-checked, so a
   * symlink cannot lead out. Default: the bundled configs/data.
   */
  data_dirs: z.array(z.string().min(1)).default(() => [bundledDataDir()]),
  /**
   * Per-sandbox cgroups (memory incl. the sandbox's tmpfs files, tasks, CPU) when the server may
   * create them (root, or a delegated subtree): `auto` uses them when writable and falls back to
   * rlimits with the reason in /status; `required` refuses to start without them; `off` never.
   */
  cgroup: z.enum(['auto', 'off', 'required']).default('auto'),
  /** Parent group of the sandboxes' cgroups, relative to each hierarchy's mount (put it inside the server's own allocation to count sandboxes against it). */
  cgroup_parent: z.string().min(1).default('raas'),
  /**
   * bwrap: a seccomp filter (Docker's and Flatpak's deny list: ptrace, process_vm_*, pidfd_getfd,
   * mounts, namespaces, keyctl, bpf, perf_event_open, userfaultfd, module loading, …) on every
   * process of the sandbox. Nested user namespaces are off either way (--disable-userns).
   */
  seccomp: z.boolean().default(true),
  /** Keep workspaces after close (debugging). */
  keep_workspaces: z.boolean().default(false),
});

export type SandboxConfig = z.infer<typeof SandboxConfig>;
export type SandboxConfigInput = z.input<typeof SandboxConfig>;
export type ImageDefinition = z.infer<typeof ImageDefinition>;
