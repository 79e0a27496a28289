import { RaasError } from '../../protocol/errors.js';
import type { Logger, SandboxOpener } from '../handlers/types.js';
import type { Sandbox, SandboxRuntime, SandboxSpec } from '../sandbox/types.js';
import type { Runtime } from '../sandbox/runtime.js';
import type { Clock } from '../../util/clock.js';

/**
 * Creates the sandbox runtime on first use. The import is dynamic so a server that only runs
 * sandbox-less handlers (chat) never loads the sandbox code or needs bwrap.
 */
export class LazySandboxRuntime {
  private runtime: Promise<SandboxRuntime> | undefined;
  private closed = false;
  /** What the runtime reports in force (isolation, limits), once it is known. */
  private described: Record<string, unknown> | undefined;
  private resolved: Runtime | undefined;

  constructor(
    private readonly config: Record<string, unknown>,
    private readonly log: Logger,
    private readonly clock?: Clock,
  ) {}

  open(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
    if (this.closed) return Promise.reject(new RaasError('sandbox_unavailable', 'the server is shutting down'));
    return this.ensure().then((rt) => rt.open(spec, signal));
  }

  /** Starts preparing an image root (the image cache's unpacking) in the background; errors are the cache's to log. */
  prefetch(ref: string): void {
    if (this.closed) return;
    this.ensure().then(
      () => this.resolved?.roots.prefetch(ref),
      () => undefined,
    );
  }

  private ensure(): Promise<SandboxRuntime> {
    if (!this.runtime) {
      const p = this.create();
      // A failed creation is not cached: the next open retries (e.g. after the operator installs bwrap).
      p.catch(() => {
        if (this.runtime === p) this.runtime = undefined;
      });
      this.runtime = p;
    }
    return this.runtime;
  }

  /** Validates the sandbox settings now (at server start) so a bad key fails fast, not at the first open. */
  async validate(): Promise<void> {
    const { SandboxConfig, describeSandbox } = await import('../sandbox/index.js');
    const r = SandboxConfig.safeParse(this.config);
    if (!r.success) {
      const i = r.error.issues[0]!;
      throw new RaasError('config_invalid', `sandbox.${i.path.map(String).join('.')}: ${i.message}`);
    }
    this.described = describeSandbox(r.data);
    this.log.info({ sandbox: this.described }, 'sandbox isolation and limits in force');
  }

  /** The isolation and limits in force, for /status (null until the sandbox settings were read). */
  describe(): Record<string, unknown> | null {
    if (!this.described) return null;
    // Counts exist once a runtime does (the first open): before, nothing was ever started.
    const counts = this.resolved?.counts() ?? {};
    // Once the runtime prepared, its cgroup probe is the word on which limits hold.
    const inForce = this.resolved?.limitsInForce();
    if (!inForce) return { ...this.described, ...counts };
    return { ...this.described, ...counts, limits: { ...(this.described.limits as object), cgroup: inForce } };
  }

  async close(): Promise<void> {
    this.closed = true;
    const rt = await this.runtime?.catch(() => undefined);
    await rt?.close();
  }

  private async create(): Promise<SandboxRuntime> {
    const { SandboxConfig, createSandboxRuntime, describeSandbox } = await import('../sandbox/index.js');
    const parsed = SandboxConfig.safeParse(this.config);
    if (!parsed.success) throw new RaasError('config_invalid', `sandbox: ${parsed.error.message}`, { cause: parsed.error });
    const rt = createSandboxRuntime(parsed.data, { log: this.log, clock: this.clock });
    this.resolved = rt;
    this.described ??= describeSandbox(parsed.data);
    return rt;
  }
}

/** The sandboxes one stage of one job opened; the pipeline closes them when the stage ends. */
export class StageSandboxes implements SandboxOpener {
  private readonly opened: Sandbox[] = [];
  private ended = false;

  constructor(
    private readonly runtime: LazySandboxRuntime,
    private readonly job: { readonly signal: AbortSignal },
  ) {}

  async open(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
    const s = await this.runtime.open(spec, signal ?? this.job.signal);
    // Opened after the stage ended (a handler that ignored its signal): close at once.
    if (this.ended) {
      await s.close().catch(() => undefined);
      throw new RaasError('cancelled', 'the stage ended before the sandbox opened');
    }
    this.opened.push(s);
    return s;
  }

  /** Sandboxes this stage opened. */
  get count(): number {
    return this.opened.length;
  }

  /** Marks the stage ended: a sandbox that opens later is closed at once. */
  end(): void {
    this.ended = true;
  }

  /** Closes every sandbox this stage opened except `keep` (INIT's runtime). Never throws. */
  async closeAll(keep?: Sandbox): Promise<void> {
    this.ended = true;
    await Promise.all(this.opened.filter((s) => s !== keep).map((s) => s.close().catch(() => undefined)));
  }
}
