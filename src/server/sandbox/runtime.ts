import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import type { Logger } from '../../util/logger.js';
import type { ToolServerOptions } from '../tools/protocol.js';
import type { Sandbox, SandboxRuntime, SandboxSpec } from './types.js';
import type { SandboxConfig } from '../../protocol/config-sandbox.js';
import { INSIDE } from './bwrap.js';
import { checkReadableByOthers, checkSocketPath, defaultRoot } from './host.js';
import { ImageCache } from './image-cache.js';
import { LoopbackLeases } from './leases.js';
import { ManagedSandbox, type LaunchPlan } from './managed.js';
import { acquireSentinel } from './sentinel.js';
import { ensureDir, installToolServer } from './prepare.js';
import { checkFileKey, createDirs, removeDirs, sweepOrphans, type SandboxDirs } from './workspace.js';
import { WarmPool } from './pool.js';
import { CgroupManager, type CgroupLimits, type SandboxCgroup } from './cgroup.js';
import { lineCapFor } from './client.js';
import { systemClock, type Clock } from '../../util/clock.js';
import { strategyFor, type ImageRoot, type PreparedHost, type RuntimeStrategy } from './runtimes/index.js';
import { ImageRoots } from './image-roots.js';
import type { RootfsStats } from './rootfs/index.js';

/** What the first open() prepares once: binaries, identity, tool server install, cgroups. */
interface Prepared extends PreparedHost {
  /** Per-sandbox cgroups, or the rlimit fallback (with its reason). */
  cgroups: CgroupManager;
}

/** Base environment inside every sandbox; the host's environment is never passed. */
const BASE_ENV: Record<string, string> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: INSIDE.workspace,
  TERM: 'xterm',
  LANG: 'C.UTF-8',
  HISTFILE: '',
  NO_COLOR: '1',
};

/**
 * The shared machinery of every runtime: lazy preparation, workspaces, images, loopback leases, the
 * warm pool, cgroups, and the set of open sandboxes that close() ends. What depends on the
 * isolation tool (bwrap, apptainer, process) is asked of its strategy.
 */
export class Runtime implements SandboxRuntime {
  readonly kind: SandboxConfig['runtime'];
  private prepared: Prepared | undefined;
  private readonly open_ = new Set<Sandbox>();
  /** Sandboxes whose close found processes still alive after SIGKILL (logged; should stay 0). */
  private survivors = 0;
  private closing: Promise<void> | undefined;
  /**
   * The runtime's own hold on the owner sentinel (sentinel.ts), from its first start to close():
   * sandboxes started one after another then share one sentinel instead of spawning one at each
   * start and running its two sweeps of /proc at each close, on the CPU the next start needs.
   */
  private sentinel: { release: () => void } | undefined;
  private warned = false;
  /** How this runtime's sandboxes are isolated and started. */
  readonly strategy: RuntimeStrategy;
  private leases: LoopbackLeases | undefined;
  private pool: WarmPool | undefined;
  private readonly starting = new Set<{ ac: AbortController; done: Promise<void> }>();
  /** The image cache (built lazily, bwrap images). */
  images: ImageCache | undefined;
  /** Sandboxes rooted in an image (SandboxSpec.rootImage): the image cache and their strategy. */
  readonly roots: ImageRoots;

  constructor(
    readonly config: SandboxConfig,
    private readonly log?: Logger,
    private readonly clock: Clock = systemClock,
  ) {
    this.kind = config.runtime;
    this.strategy = strategyFor(config);
    this.roots = new ImageRoots(config, () => this.prepare(), BASE_ENV.PATH!, log, clock);
  }

  /** Checks binaries and the sandbox user and installs the tool server; runs on the first open(). */
  prepare(): Prepared {
    if (this.prepared) return this.prepared;
    const c = this.config;
    const root = path.resolve(c.root ?? defaultRoot());
    const { binary, identity } = this.strategy.locate();
    const node = c.node ?? process.execPath;
    if (identity) {
      checkReadableByOthers(
        node,
        'node',
        'install node system-wide (e.g. /usr/bin/node from Debian or NodeSource), or set sandbox.node to a node binary under a world-readable path',
      );
    }
    ensureDir(root);
    for (const d of ['ws', 'run', 'owners', 'tool-server', 'net', 'ovl']) ensureDir(path.join(root, d));
    checkSocketPath(path.join(root, 'run', 'x'.repeat(17), 'tools.sock'), 'sandbox socket (under sandbox.root)');
    const toolServer = installToolServer(root, this.strategy.installOptions(node));
    this.strategy.prepare(root);
    const orphans = sweepOrphans(root);
    if (orphans) this.log?.info({ root, removed: orphans }, 'removed workspaces of sandboxes whose server is gone');
    this.images = new ImageCache({ root: path.join(root, 'images'), runtime: this, log: this.log, clock: this.clock });
    const cgroups = CgroupManager.detect({ ...this.strategy.cgroupOptions(identity), clock: this.clock });
    this.log?.info({ limits: cgroups.describe() }, 'sandbox resource limits');
    void cgroups.sweep().then(
      (n) => n && this.log?.info({ removed: n }, 'removed cgroups of sandboxes whose server is gone'),
      () => undefined,
    );
    this.prepared = { root, toolServer, identity, binary, node, cgroups };
    return this.prepared;
  }

  async open(spec: SandboxSpec = {}, signal?: AbortSignal): Promise<Sandbox> {
    return this.openWith(spec, undefined, signal);
  }

  /**
   * Opens a sandbox whose workspace is the host directory `dir` (image builds: the operator's setup
   * script fills it, and the tree is kept as the image). Every other sandbox's workspace is private.
   */
  openBuild(spec: SandboxSpec, dir: string, signal?: AbortSignal): Promise<Sandbox> {
    return this.openWith(spec, dir, signal);
  }

  private async openWith(spec: SandboxSpec, buildDir: string | undefined, signal?: AbortSignal): Promise<Sandbox> {
    signal?.throwIfAborted();
    if (this.closing) throw new RaasError('sandbox_error', 'the sandbox runtime is closed');
    const p = this.prepare();
    if (!this.strategy.isolated && !this.warned) {
      this.warned = true;
      this.log?.warn({ runtime: 'process' }, 'sandbox.runtime is "process": tools run on the host without any isolation');
    }
    for (const rel of Object.keys(spec.files ?? {})) checkFileKey(rel);
    for (const b of spec.readOnly ?? []) {
      if (!path.isAbsolute(b.host) || !path.isAbsolute(b.inside) || b.inside === '/' || b.inside.startsWith(INSIDE.workspace)) {
        throw new RaasError(
          'bad_request',
          `SandboxSpec.readOnly: ${JSON.stringify(b)} needs absolute host and inside paths, inside not / or the workspace`,
          { retryable: false },
        );
      }
    }
    const imageDir = spec.image ? await this.images!.resolve(spec.image, signal) : undefined;
    const rooted = spec.rootImage
      ? await this.roots.rootOf(
          spec.rootImage,
          (spec.readOnly ?? []).map((b) => b.inside),
          signal,
        )
      : undefined;
    const root = rooted?.root;
    if (!buildDir && !root && this.poolable(spec)) {
      const pool = this.warmPool(p);
      let sb: ManagedSandbox | undefined;
      try {
        sb = await pool.take(signal);
        if (sb) {
          // A pooled sandbox started with the defaults and warmed its tools: a spec that keeps the
          // defaults needs no configure round trip and no cgroup write, only its files.
          if (hasKeys(spec.env) || hasKeys(spec.limits) || spec.tools) {
            const limits = { ...this.config.limits, ...(spec.limits ?? {}) };
            await sb.configure({ env: this.toolEnv(spec), limits, ...(spec.tools ? { tools: spec.tools } : {}) }, signal);
          }
          if (hasKeys(spec.limits)) sb.cgroup?.setLimits(this.cgroupLimits(spec));
          await sb.writeFiles(spec.files ?? {}, signal);
          return sb;
        }
      } catch (e) {
        await sb?.close();
        throw e;
      } finally {
        // The replacement starts once this open() has returned (its start blocks the loop a few ms).
        setImmediate(() => pool.fill());
      }
    }
    let sb: ManagedSandbox;
    try {
      sb = await this.start(p, spec, imageDir, signal, buildDir, root, rooted?.release);
    } catch (e) {
      rooted?.release();
      throw e;
    }
    try {
      await sb.writeFiles(spec.files ?? {}, signal);
    } catch (e) {
      await sb.close();
      throw e;
    }
    return sb;
  }

  /** The strategy a sandbox starts with: the image-rooted variant for a spec with a root image. */
  private strategyOf(root: ImageRoot | undefined): RuntimeStrategy {
    return root ? this.roots.strategy() : this.strategy;
  }

  /**
   * For /status: sandboxes alive now (pooled and closing ones included), closes that left processes
   * behind, and once an image was used, the image cache (entries and bytes on disk; this server's
   * conversions, hits, evictions and conversions under way) and the overlay in force (kernel or fuse).
   */
  counts(): { open: number; survived_close: number; image_cache?: RootfsStats; image_overlay?: string } {
    return { open: this.open_.size, survived_close: this.survivors, ...this.roots.stats() };
  }

  /** The sandboxes this runtime has open (pooled ones included). */
  openSandboxes(): Sandbox[] {
    return [...this.open_];
  }

  /** Starts `pool_size` sandboxes ahead of the first open (optional; open() fills the pool too). */
  warmup(): void {
    if (this.config.pool_size > 0 && this.strategy.poolable && !this.closing) this.warmPool(this.prepare()).fill();
  }

  /** Resolves once the warm pool is full of started, warmed sandboxes (at once without a pool). */
  async poolReady(): Promise<void> {
    await this.pool?.settled();
  }

  private warmPool(p: Prepared): WarmPool {
    // The handshake and the tools' start happen here, at fill time, off the critical path of open().
    this.pool ??= new WarmPool(this.config.pool_size, () => this.startWarm(p), this.log);
    return this.pool;
  }

  /** Starts a pooled sandbox with the defaults and warms its tools (bash at its prompt, python ready). */
  private async startWarm(p: Prepared): Promise<ManagedSandbox> {
    const sb = await this.start(p, {}, undefined);
    try {
      await sb.warm();
    } catch (e) {
      await sb.close();
      throw e;
    }
    return sb;
  }

  /** A pooled sandbox fits specs whose start-time choices (network, image, /tmp size) are the defaults. */
  private poolable(spec: SandboxSpec): boolean {
    if (this.config.pool_size <= 0 || !this.strategy.poolable || spec.network === true || spec.image || spec.readOnly?.length) return false;
    const tmp = spec.limits?.tmp_size_mb;
    return tmp === undefined || tmp === this.config.limits.tmp_size_mb;
  }

  /** Starts one sandbox: directories, loopback lease, the runtime's command line, the tool server. */
  private start(
    p: Prepared,
    spec: SandboxSpec,
    imageDir: string | undefined,
    signal?: AbortSignal,
    buildDir?: string,
    root?: ImageRoot,
    release?: () => void,
  ): Promise<ManagedSandbox> {
    if (this.closing) return Promise.reject(new RaasError('sandbox_error', 'the sandbox runtime is closed'));
    this.sentinel ??= acquireSentinel();
    // close() aborts starts in flight and waits for them, so it never resolves with a workspace left.
    const ac = new AbortController();
    const started = this.startOne(p, spec, imageDir, signal ? AbortSignal.any([signal, ac.signal]) : ac.signal, buildDir, root, release);
    const entry = {
      ac,
      done: started.then(
        () => undefined,
        () => undefined,
      ),
    };
    this.starting.add(entry);
    void entry.done.then(() => this.starting.delete(entry));
    return started;
  }

  private async startOne(
    p: Prepared,
    spec: SandboxSpec,
    imageDir: string | undefined,
    signal: AbortSignal,
    buildDir?: string,
    root?: ImageRoot,
    release?: () => void,
  ): Promise<ManagedSandbox> {
    const id = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    // A private workspace (bwrap: a tmpfs) needs only the owner record on the host (and the
    // directory an image build binds); a host workspace is created and seeded before anything runs.
    const st = this.strategyOf(root);
    const dirs = createDirs(
      p.root,
      id,
      p.identity,
      buildDir
        ? { mode: 'bind', dir: buildDir }
        : st.hostWorkspace
          ? { mode: 'host', imageDir }
          : st.socketDir
            ? { mode: 'socket' }
            : { mode: 'private' },
    );
    // Runtimes that share the host network get their own loopback address.
    const sharesNet = st.sharesHostNetwork(spec);
    st.check(spec, p.identity);
    let address: string | undefined;
    let group: SandboxCgroup | undefined;
    // Assigned once start() returns; cleanup may run inside start() (a failed start) before that.
    let sb: ManagedSandbox | undefined;
    try {
      if (sharesNet) address = this.leaseTable(p.root).acquire();
      // The cgroup counts the sandbox's processes and the files of its tmpfs mounts.
      group = p.cgroups.create(id, this.cgroupLimits(spec));
      // An image build binds its output directory, seeded from the base image through the tool server.
      const base = this.plan(p, dirs, spec, address, st.seedsImages || buildDir ? imageDir : undefined, root);
      // A launch that reads its arguments from a pipe is joined by the server before they are
      // written, unless the shell wrapper (which joins before it execs) moves itself in cheaper
      // (cgroup v1); any other launch starts through the wrapper.
      const wrapped = group && (!base.argsFd || group.selfJoinIsCheap);
      const plan = group && wrapped ? group.wrapSpawn(base) : base;
      sb = await ManagedSandbox.start(
        plan,
        {
          id,
          workspace: st.hostWorkspace ? dirs.workspace : (root?.workdir ?? INSIDE.workspace),
          isolated: st.isolated,
          address,
          startTimeoutMs: this.config.start_timeout_s * 1000,
          graceMs: this.config.close_grace_ms,
          maxLineBytes: this.config.max_input_bytes,
          clientOptions: { maxLineBytes: lineCapFor({ output_cap: this.config.output_cap }), maxReadBytes: this.config.max_read_bytes },
          cgroup: group,
          join: wrapped ? undefined : group,
          log: this.log,
          clock: this.clock,
          cleanup: async () => {
            if (sb) this.open_.delete(sb);
            if (sb?.leftover.length) this.survivors++;
            if (address) this.leaseTable(p.root).release(address);
            if (!this.config.keep_workspaces) removeDirs(dirs);
            release?.();
            await group?.remove().catch((e: unknown) => this.log?.error({ err: (e as Error).message }, 'sandbox cgroup not removed'));
          },
        },
        signal,
      );
      this.open_.add(sb);
      return sb;
    } catch (e) {
      // ManagedSandbox.start already ran cleanup when the process started; this covers earlier failures.
      if (address) this.leaseTable(p.root).release(address);
      if (!this.config.keep_workspaces) removeDirs(dirs);
      await group?.remove().catch(() => undefined);
      throw e;
    }
  }

  /**
   * A sandbox's cgroup limits. `memory_mb` bounds the sandbox as a whole: its processes together
   * and the files of its tmpfs mounts (/tmp, the workspace), whose pages the kernel charges to the
   * same group, as Docker and Kubernetes count a memory-backed tmpfs.
   */
  private cgroupLimits(spec: SandboxSpec): CgroupLimits {
    const l = { ...this.config.limits, ...(spec.limits ?? {}) };
    return { memory_mb: l.memory_mb, processes: l.processes, cpus: l.cpus };
  }

  /** What the runtime has in force: the cgroup mode (or the rlimit fallback and why). */
  limitsInForce(): ReturnType<CgroupManager['describe']> | undefined {
    return this.prepared?.cgroups.describe();
  }

  /** Environment of bash and python: base, the config's, the spec's; never the host's. */
  private toolEnv(spec: SandboxSpec, processWorkspace?: string, address?: string, root?: ImageRoot): Record<string, string> {
    // An image's own environment (its PATH among it) comes before the config's and the spec's; an
    // image whose environment the runtime applies inside (Apptainer) keeps its PATH: ours is not sent.
    const image = root ? { HOME: root.workdir, ...root.env } : {};
    const { PATH: basePath, ...rest } = BASE_ENV;
    const base = root?.inherit ? rest : { PATH: basePath!, ...rest };
    const env: Record<string, string> = { ...base, ...image, ...this.config.env, ...(spec.env ?? {}) };
    if (processWorkspace) env.HOME = processWorkspace;
    if (address) env.RAAS_LOOPBACK_ADDR = address;
    return env;
  }

  private leaseTable(root: string): LoopbackLeases {
    this.leases ??= new LoopbackLeases(this.config.leases.file ?? path.join(root, 'leases.json'), this.config.leases.ttl_s * 1000);
    return this.leases;
  }

  /** The tool server's options and the command line that starts it (the strategy's launch). */
  plan(p: Prepared, dirs: SandboxDirs, spec: SandboxSpec, address?: string, seed?: string, root?: ImageRoot): LaunchPlan {
    const c = this.config;
    const st = this.strategyOf(root);
    const limits = { ...c.limits, ...(spec.limits ?? {}) };
    const { home, ...view } = st.view(dirs, seed, root);
    const env = this.toolEnv(spec, st.isolated ? undefined : dirs.workspace, address, root);
    const options: ToolServerOptions = {
      ...view,
      max_read_bytes: c.max_read_bytes,
      tools: spec.tools,
      bash_backend: c.bash_backend,
      tmux_poll_ms: c.tmux_poll_ms,
      python: root ? root.python : c.python,
      ...(root ? { shell: root.shell } : {}),
      env,
      limits,
      output_cap: c.output_cap,
      max_input_bytes: c.max_input_bytes,
    };
    const socket = path.join(dirs.run, 'tools.sock');
    checkSocketPath(socket);
    const nodeEnv = { PATH: BASE_ENV.PATH, HOME: home, LANG: 'C.UTF-8', HISTFILE: '' };
    return st.launch({ prepared: p, dirs, spec, options, nodeEnv, socket, seed, root, tmpSizeMb: limits.tmp_size_mb, path: BASE_ENV.PATH });
  }

  /** Closes every open sandbox. Safe twice. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const reason = new RaasError('sandbox_error', 'the sandbox runtime closed while this sandbox was starting');
      for (const s of this.starting) s.ac.abort(reason);
      await Promise.all([...this.starting].map((s) => s.done));
      await this.pool?.close();
      await Promise.all([...this.open_].map((s) => s.close()));
      this.sentinel?.release();
      // Conversions under way stop (their temporary trees are removed); finished entries stay for the next server.
      await this.roots.close();
    })();
    return this.closing;
  }
}

function hasKeys(o: object | undefined): boolean {
  return o !== undefined && Object.keys(o).length > 0;
}
