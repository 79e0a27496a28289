import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { RaasError } from '../../protocol/errors.js';
import type { Logger } from '../../util/logger.js';
import type {
  BashOptions,
  BashResult,
  EditOp,
  EditResult,
  ExecOptions,
  ExecResult,
  PythonOptions,
  PythonResult,
  ReadFileOptions,
  Sandbox,
} from './types.js';
import { ToolClient, type ToolClientOptions } from './client.js';
import type { SandboxCgroup } from './cgroup.js';
import { startUserNet, type UserNet } from './network.js';
import { CONN_FD, type ToolCalls } from '../tools/protocol.js';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { alive, pidNamespace, processesInNamespace, sandboxTree, signal } from './proc.js';
import { sleep, systemClock, type Clock } from '../../util/clock.js';
import { acquireSentinel } from './sentinel.js';

/** How to start one sandbox's tool server. */
export interface LaunchPlan {
  file: string;
  args: string[];
  env: Record<string, string>;
  uid?: number;
  gid?: number;
  cwd?: string;
  /** Host path of the tool server's socket (runtimes that listen on a path: apptainer, process). */
  socket: string;
  /** The tool server talks over an inherited socketpair at fd CONN_FD instead of a socket path (bwrap). */
  connFd?: boolean;
  /** bwrap: `--json-status-fd 3` reports the host pid of the sandbox's pid 1. */
  statusFd?: boolean;
  /**
   * The program's arguments on a pipe (bwrap `--args FD`), written once the server joined the
   * process to the sandbox's cgroup (`SandboxMeta.join`; at once without one, when a shell wrapper
   * joined before exec): until then it waits, having started nothing, so every process of the
   * sandbox is born inside its group.
   */
  argsFd?: { fd: number; args: string[] };
  /** Extra data handed to the child on its own pipe fd (bwrap: the seccomp program), fd → bytes. */
  fdData?: Record<number, Buffer>;
  /**
   * bwrap with network: start slirp4netns for the sandbox once its pid is known; bwrap holds
   * `syncFd`; the helper runs as `uid`/`gid` (the sandbox user, whatever wrapper starts bwrap).
   */
  network?: { syncFd: number; uid?: number; gid?: number };
}

/** The stdio array of a launch: stdin, stdout, stderr, the status fd, data fds, the connection fd. */
function stdioOf(plan: LaunchPlan): Array<'pipe' | 'ignore'> {
  // Over a socketpair the sandbox's stdin and stdout lead nowhere: the sandbox's pid 1 (bwrap, whose
  // memory same-uid code can reach) then holds no channel to the host but stderr, which the host
  // stops reading once the tool server is ready.
  const stdio: Array<'pipe' | 'ignore'> = plan.connFd ? ['ignore', 'ignore', 'pipe'] : ['pipe', 'pipe', 'pipe'];
  const want = (fd: number): void => {
    while (stdio.length <= fd) stdio.push('ignore');
    stdio[fd] = 'pipe';
  };
  if (plan.statusFd) want(3);
  for (const fd of Object.keys(plan.fdData ?? {})) want(Number(fd));
  if (plan.argsFd) want(plan.argsFd.fd);
  if (plan.connFd) want(CONN_FD);
  if (plan.network) want(plan.network.syncFd);
  return stdio;
}

export interface SandboxMeta {
  id: string;
  workspace: string;
  address?: string;
  startTimeoutMs: number;
  graceMs: number;
  log?: Logger;
  /** False for the `process` runtime (no isolation; host paths as they are). */
  isolated?: boolean;
  /** The tool server's request line limit (sandbox.max_input_bytes), for splitting file writes. */
  maxLineBytes?: number;
  /** Bounds of the host's reads from the tool server (answer lines). */
  clientOptions?: ToolClientOptions;
  /** The sandbox's cgroup (limits, and what hit them), when cgroups are in force. */
  cgroup?: SandboxCgroup;
  /** The group a plan with `argsFd` joins before its arguments are written (none: written at once). */
  join?: SandboxCgroup;
  /** Timers of the start deadline and the close sequence (default: the system clock). */
  clock?: Clock;
  /** Removes the workspace, releases the lease; runs once after the processes are gone. */
  cleanup: () => void | Promise<void>;
}

/**
 * One running sandbox: its process (bwrap, apptainer or the bare tool server), the tool client, and
 * the close sequence (graceful stop through the tool server, SIGTERM to the process group, SIGKILL
 * after a grace period, then a process-table check that nothing of the sandbox remains).
 */
export class ManagedSandbox implements Sandbox {
  private closing: Promise<void> | undefined;
  private exited = false;
  private readonly exitPromise: Promise<void>;
  private stderrTail = '';
  /** Host pid of the sandbox's pid 1 and its pid namespace (bwrap), for the process-table check. */
  private innerPid: number | undefined;
  private ns: string | undefined;
  private toolServerPid: number | undefined;
  private client: ToolClient | undefined;
  /** The network helper (slirp4netns) of a network sandbox, started once bwrap reports its child pid. */
  private netStart: Promise<UserNet> | undefined;
  /** Hook for tests of the close path: the last check's leftover pids (should be empty). */
  leftover: number[] = [];

  readonly id: string;
  readonly workspace: string;
  readonly address?: string;
  readonly isolated: boolean;
  private readonly clock: Clock;

  private constructor(
    private readonly child: ChildProcess,
    private readonly meta: SandboxMeta,
  ) {
    this.id = meta.id;
    this.workspace = meta.workspace;
    this.address = meta.address;
    this.isolated = meta.isolated ?? true;
    this.clock = meta.clock ?? systemClock;
    this.exitPromise = new Promise((r) => child.once('exit', () => ((this.exited = true), r())));
  }

  /** Spawns the plan and waits until the tool server answers on its socket. */
  static async start(plan: LaunchPlan, meta: SandboxMeta, signal?: AbortSignal): Promise<ManagedSandbox> {
    signal?.throwIfAborted();
    // An argument with a NUL byte would become two on the pipe: refused, as spawn() refuses it in argv.
    const bad = plan.argsFd?.args.find((a) => a.includes('\0'));
    if (bad !== undefined) throw new RaasError('sandbox_error', `sandbox argument ${JSON.stringify(bad)} contains a NUL byte: remove it`);
    // A launch that waits for its options starts the sentinel in release(), before they are written.
    const owner = acquireSentinel({ deferStart: plan.argsFd !== undefined });
    let child: ChildProcess;
    try {
      child = spawn(plan.file, plan.args, {
        env: { ...plan.env, ...owner.env },
        cwd: plan.cwd,
        uid: plan.uid,
        gid: plan.gid,
        detached: true,
        stdio: stdioOf(plan),
      });
    } catch (e) {
      owner.release();
      throw e;
    }
    for (const [fd, data] of Object.entries(plan.fdData ?? {})) {
      const w = (child.stdio as unknown as Array<Writable | null>)[Number(fd)];
      w?.on('error', () => undefined);
      w?.end(data);
    }
    const sb = new ManagedSandbox(child, meta);
    sb.releaseOwner = owner.release;
    try {
      await sb.waitReady(plan, signal, () => sb.release(plan, owner.start));
      return sb;
    } catch (e) {
      await sb.close();
      throw e;
    }
  }

  /**
   * A plan with `argsFd`: joins the group, then writes the arguments (bwrap starts on their EOF).
   * The sentinel starts while the join waits for the kernel, and before anything can fork.
   */
  private async release(plan: LaunchPlan, startSentinel: () => void): Promise<void> {
    if (!plan.argsFd) return;
    const pid = this.child.pid;
    if (pid === undefined) return; // the spawn failed: its 'error' event ends the start
    const joined = this.meta.join?.join(pid);
    try {
      startSentinel();
    } catch (e) {
      await joined?.catch(() => undefined);
      throw e;
    }
    await joined;
    const w = (this.child.stdio as unknown as Array<Writable | null>)[plan.argsFd.fd];
    w?.on('error', () => undefined);
    w?.end(plan.argsFd.args.map((a) => `${a}\0`).join(''));
  }

  private waitReady(plan: LaunchPlan, signal: AbortSignal | undefined, release: () => Promise<void>): Promise<void> {
    const child = this.child;
    child.stdin?.on('error', () => undefined);
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (this.stderrTail = (this.stderrTail + d).slice(-4000)));
    let pidKnown: ((pid: number) => void) | undefined;
    if (plan.network) {
      const known = new Promise<number>((r) => (pidKnown = r));
      const sync = (this.child.stdio as unknown as Readable[])[plan.network.syncFd]!;
      this.netStart = known.then((pid) =>
        startUserNet({ pid, uid: plan.network!.uid, gid: plan.network!.gid, sync, signal, clock: this.clock }),
      );
      this.netStart.catch(() => undefined);
    }
    if (plan.statusFd) {
      const status = createInterface({ input: child.stdio[3] as Readable });
      status.on('line', (line) => {
        try {
          const pid = (JSON.parse(line) as Record<string, unknown>)['child-pid'];
          if (typeof pid === 'number' && this.innerPid === undefined) {
            this.innerPid = pid;
            this.ns = pidNamespace(pid);
            pidKnown?.(pid);
          }
        } catch {
          /* other status lines */
        }
      });
    }
    return new Promise<void>((resolve, reject) => {
      const lines = child.stdout ? createInterface({ input: child.stdout }) : undefined;
      const timer = this.clock.setTimeout(
        () =>
          done(
            new RaasError(
              'sandbox_error',
              `the tool server did not start within ${this.meta.startTimeoutMs} ms (sandbox.start_timeout_s); stderr: ${this.stderrTail.trim() || '(empty)'}`,
            ),
          ),
        this.meta.startTimeoutMs,
      );
      const onAbort = (): void => done(signal!.reason);
      const onExit = (code: number | null): void =>
        done(
          new RaasError('sandbox_error', `the sandbox exited during start (code ${code}); stderr: ${this.stderrTail.trim() || '(empty)'}`),
        );
      const onError = (e: Error): void =>
        done(new RaasError('sandbox_unavailable', `cannot start ${plan.file}: ${e.message}`, { cause: e, retryable: false }));
      let settled = false;
      const done = (err?: unknown): void => {
        if (settled) return;
        settled = true;
        this.clock.clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        child.off('exit', onExit);
        child.off('error', onError);
        lines?.removeAllListeners('line');
        // Past the ready line the host reads nothing more from the tool server's stdout: drained, never buffered.
        lines?.close();
        child.stdout?.on('data', () => undefined);
        child.stdout?.resume();
        // Over a socketpair, stderr matters only until the tool server is ready: then it is closed.
        if (!err && plan.connFd) child.stderr?.destroy();
        if (err) reject(err);
        else resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      child.once('exit', onExit);
      child.once('error', onError);
      release().catch(done);
      const announced = (pid: number | undefined): void => {
        this.toolServerPid = pid;
        // A network sandbox is ready once its interface is up too.
        if (this.netStart) this.netStart.then(() => done(), done);
        else done();
      };
      if (plan.connFd) {
        this.client = ToolClient.fromSocket((child.stdio as unknown as Socket[])[CONN_FD]!, this.meta.clientOptions);
        void this.client.ready().then(announced);
        return;
      }
      lines!.on('line', (line) => {
        let msg: { ready?: boolean; pid?: number };
        try {
          msg = JSON.parse(line) as typeof msg;
        } catch {
          return;
        }
        if (!msg.ready) return;
        this.toolServerPid = msg.pid;
        ToolClient.connect(plan.socket, signal, this.meta.clientOptions).then((c) => {
          this.client = c;
          done();
        }, done);
      });
    });
  }

  private tools(): ToolClient {
    if (this.closing || !this.client) throw new RaasError('sandbox_error', `sandbox ${this.id} is closed`);
    return this.client;
  }

  async bash(command: string, opts: BashOptions = {}): Promise<BashResult> {
    const { signal, ...rest } = opts;
    const r = await this.noted(this.tools().call('bash', { command, ...rest }, signal));
    return r.note ? { ...r.value, output: `${r.value.output}\n[raas: ${r.note}]` } : r.value;
  }

  async python(code: string, opts: PythonOptions = {}): Promise<PythonResult> {
    const { signal, ...rest } = opts;
    const r = await this.noted(this.tools().call('python', { code, ...rest }, signal));
    return r.note ? { ...r.value, stderr: `${r.value.stderr}\n[raas: ${r.note}]` } : r.value;
  }

  /**
   * Adds what the cgroup saw during a call (an OOM kill, refused forks) to its answer, so the model
   * and the result see which limit was hit; a call that failed because the limit killed the tool
   * server itself becomes a `sandbox_limit` error naming it.
   */
  private async noted<T>(call: Promise<T>): Promise<{ value: T; note?: string }> {
    let value: T;
    try {
      value = await call;
    } catch (e) {
      const note = this.meta.cgroup?.limitNote();
      if (note && e instanceof RaasError && e.code === 'sandbox_error')
        throw new RaasError('sandbox_limit', `${e.message}: ${note}`, { cause: e, retryable: false });
      throw e;
    }
    return { value, note: this.meta.cgroup?.limitNote() };
  }

  /** The network helper's view (address, gateway, resolver) of a network sandbox. */
  async networkInfo(): Promise<ReturnType<UserNet['describe']> | undefined> {
    return (await this.netStart?.catch(() => undefined))?.describe();
  }

  /** The sandbox's cgroup (undefined under the rlimit fallback). */
  get cgroup(): SandboxCgroup | undefined {
    return this.meta.cgroup;
  }

  async edit(op: EditOp, opts: { signal?: AbortSignal } = {}): Promise<EditResult> {
    return this.tools().call('edit', { op }, opts.signal);
  }

  async readFile(path: string, opts: ReadFileOptions = {}): Promise<Buffer> {
    const r = await this.tools().call('read_file', { path, ...(opts.maxBytes ? { max_bytes: opts.maxBytes } : {}) }, opts.signal);
    return Buffer.from(r.data, 'base64');
  }

  async exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const { signal, maxOutputBytes, ...rest } = opts;
    const r = await this.noted(
      this.tools().call('exec', { argv, ...rest, ...(maxOutputBytes ? { max_output_bytes: maxOutputBytes } : {}) }, signal),
    );
    return r.note ? { ...r.value, stderr: `${r.value.stderr}\n[raas: ${r.note}]` } : r.value;
  }

  /**
   * Writes files into the workspace through the tool server (as the sandbox user), in requests that
   * stay under the tool server's line limit: small files go together, a large one in appended parts.
   */
  async writeFiles(files: Record<string, string>, signal?: AbortSignal): Promise<void> {
    const budget = Math.max(4096, Math.floor((this.meta.maxLineBytes ?? 1 << 20) / 4));
    let batch: Record<string, string> = {};
    let size = 0;
    const flush = async (append = false): Promise<void> => {
      if (Object.keys(batch).length) await this.tools().call('write_files', { files: batch, ...(append ? { append: true } : {}) }, signal);
      batch = {};
      size = 0;
    };
    for (const [rel, content] of Object.entries(files)) {
      const cost = (s: string): number => JSON.stringify(s).length + rel.length + 8;
      if (cost(content) <= budget) {
        if (size + cost(content) > budget) await flush();
        batch[rel] = content;
        size += cost(content);
        continue;
      }
      await flush();
      // JSON escapes can make a character cost up to 6 bytes: cut parts by their escaped size.
      let first = true;
      for (let at = 0; at < content.length; ) {
        let n = Math.min(content.length - at, budget);
        while (n > 1 && cost(content.slice(at, at + n)) > budget) n = Math.floor(n / 2);
        batch[rel] = content.slice(at, at + n);
        await flush(!first);
        first = false;
        at += n;
      }
    }
    await flush();
  }

  /** Starts bash and python inside and waits for them (a pooled sandbox, before a job takes it). */
  async warm(signal?: AbortSignal): Promise<void> {
    await this.tools().call('warm', {}, signal);
  }

  /** Sets env, limits and tools of a pooled tool server before its first bash or python call. */
  async configure(opts: ToolCalls['configure']['args'], signal?: AbortSignal): Promise<void> {
    await this.tools().call('configure', opts, signal);
  }

  /** Raw access for tests that send malformed lines. */
  get toolClient(): ToolClient | undefined {
    return this.client;
  }

  /** Host pid of the outer process (bwrap, apptainer, or the tool server itself). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The sandbox's pid namespace (bwrap), for process-table checks. */
  get pidNamespace(): string | undefined {
    return this.ns;
  }

  /** Leaves the sentinel that kills this sandbox's processes if the server dies (sentinel.ts). */
  private releaseOwner: () => void = () => undefined;

  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async waitExit(ms: number): Promise<boolean> {
    if (this.exited) return true;
    await Promise.race([this.exitPromise, sleep(ms, undefined, this.clock)]);
    return this.exited;
  }

  private async doClose(): Promise<void> {
    const pid = this.child.pid;
    // Without a pid namespace, remember the tree now: children reparent once the tool server dies.
    const tree = this.ns === undefined && this.toolServerPid ? sandboxTree(this.toolServerPid) : [];
    if (this.client && !this.exited) {
      this.client.call('shutdown', {}).catch(() => undefined);
      await this.waitExit(this.meta.graceMs);
    }
    this.client?.close();
    if (pid !== undefined && !this.exited) {
      signal(-pid, 'SIGTERM');
      if (!(await this.waitExit(this.meta.graceMs))) {
        signal(-pid, 'SIGKILL');
        // SIGTERM to a pid-namespace init is ignored; SIGKILL to it ends the whole namespace.
        if (this.innerPid) signal(this.innerPid, 'SIGKILL');
        await this.waitExit(2000);
      }
    }
    if (this.innerPid) signal(this.innerPid, 'SIGKILL');
    // The helper ends with the sandbox (bwrap's --sync-fd); close() covers a start that failed half way.
    await (await this.netStart?.catch(() => undefined))?.close();
    this.leftover = await this.sweep(tree);
    if (this.leftover.length) {
      this.meta.log?.error({ sandbox: this.id, pids: this.leftover }, 'sandbox processes survived close');
    }
    this.releaseOwner();
    await this.meta.cleanup();
  }

  /** The process-table assertion: wait until no process of the sandbox remains, killing stragglers. */
  private async sweep(tree: number[]): Promise<number[]> {
    const find = (): number[] => (this.ns ? processesInNamespace(this.ns) : tree.filter(alive));
    for (let i = 0; i < 40; i++) {
      const left = find();
      if (left.length === 0) return [];
      if (i >= 5) for (const p of left) signal(p, 'SIGKILL');
      await sleep(25, undefined, this.clock);
    }
    return find();
  }
}
