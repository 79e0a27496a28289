import net from 'node:net';
import fs from 'node:fs';
import { PtyBash, ToolInputError, type BashAnswer, type BashRequest } from './bash-pty.js';
import { TmuxBash } from './bash-tmux.js';
import { PythonKernel } from './python.js';
import { Editor } from './editor.js';
import type { ToolCalls, ToolName, ToolRequest, ToolResponse, ToolServerOptions } from './protocol.js';
import { execProcess } from './exec.js';
import { DEFAULT_MAX_READ, ToolLimitError, freeBytes, readFileCapped, writeFiles } from './files.js';

/** The common face of the PTY bash and the tmux baseline. */
export interface BashBackend {
  run(req: BashRequest): Promise<BashAnswer>;
  interrupt(): void;
  close(): void;
}

/** Longest request line accepted; longer lines are answered with an error and skipped. */
const DEFAULT_MAX_INPUT = 1 << 20;

/**
 * The tool server: JSON lines over a Unix domain socket, one request per line, answers tagged with
 * the request id. Bash and python may run at the same time; each refuses a second concurrent call.
 * Any bad input gets an error answer and the server keeps serving.
 */
export class ToolServer {
  private readonly server: net.Server;
  private bash: BashBackend | undefined;
  private python: PythonKernel | undefined;
  private editor: Editor | undefined;
  /** Set once bash or python ran a command: `configure` is refused after that. */
  private used = false;
  /** Running request id → its tool, how to interrupt it, and its completion. */
  private readonly inflight = new Map<number, { tool: 'bash' | 'python' | 'exec'; interrupt: () => void; done?: Promise<unknown> }>();
  /** A cancelled call still unwinding (Ctrl-C, KeyboardInterrupt): the next call of that tool waits for it. */
  private readonly settling = new Map<'bash' | 'python' | 'exec', Promise<unknown>>();
  private readonly maxInput: number;
  private readonly sockets = new Set<net.Socket>();
  private closing = false;
  /** Warm the tools once the first answer is out (set by main; tests start tools on demand). */
  warmAfterFirstAnswer = false;

  constructor(
    private opts: ToolServerOptions,
    private readonly onShutdown: () => void = () => undefined,
  ) {
    this.build();
    this.maxInput = opts.max_input_bytes ?? DEFAULT_MAX_INPUT;
    this.server = net.createServer((sock) => this.serve(sock));
  }

  private build(): void {
    const opts = this.opts;
    const tools = opts.tools ?? ['bash', 'python', 'editor'];
    this.bash = tools.includes('bash') ? (opts.bash_backend === 'tmux' ? new TmuxBash(opts) : new PtyBash(opts)) : undefined;
    this.python = tools.includes('python') ? new PythonKernel(opts) : undefined;
    this.editor = tools.includes('editor') ? new Editor(opts.workspace, opts.output_cap) : undefined;
  }

  /**
   * Sets the environment, limits and tools of a tool server started ahead of its job (a warm pool),
   * before any bash or python exists.
   */
  private configure(req: Record<string, unknown>): { configured: true } {
    if (this.used) throw new ToolInputError('configure must come before the first bash or python call');
    const env = req.env as Record<string, string> | undefined;
    if (env !== undefined && (typeof env !== 'object' || Object.values(env).some((v) => typeof v !== 'string'))) {
      throw new ToolInputError('env must be an object of strings');
    }
    const tools = req.tools as ToolServerOptions['tools'];
    if (tools !== undefined && (!Array.isArray(tools) || tools.some((t) => !['bash', 'python', 'editor'].includes(t)))) {
      throw new ToolInputError('tools must be a list of bash, python, editor');
    }
    const before = this.opts;
    this.opts = {
      ...this.opts,
      ...(env ? { env } : {}),
      ...(req.limits ? { limits: req.limits as ToolServerOptions['limits'] } : {}),
      ...(tools ? { tools } : {}),
    };
    // Only a warmed bash or python (a pooled sandbox) exists here: none has run a command. With the
    // same environment and limits they stay (a tool no longer enabled is stopped); otherwise they
    // are stopped and started again with the new ones.
    const same =
      JSON.stringify(before.env ?? {}) === JSON.stringify(this.opts.env ?? {}) &&
      JSON.stringify(before.limits ?? {}) === JSON.stringify(this.opts.limits ?? {});
    const want = this.opts.tools ?? ['bash', 'python', 'editor'];
    if (same) {
      if (!want.includes('bash')) this.bash?.close();
      if (!want.includes('python')) this.python?.close();
      const kept = { bash: want.includes('bash') ? this.bash : undefined, python: want.includes('python') ? this.python : undefined };
      this.build();
      if (kept.bash) this.bash = kept.bash;
      if (kept.python) this.python = kept.python;
    } else {
      this.bash?.close();
      this.python?.close();
      this.build();
    }
    return { configured: true };
  }

  /**
   * Starts the enabled tools and answers once bash shows its prompt and python ran an empty cell:
   * a pooled sandbox is warmed this way before a job takes it, so the job's first call pays
   * neither the spawns nor the tool server's first-request compilation.
   */
  private async warmNow(): Promise<{ warm: true }> {
    if (this.closing) return { warm: true };
    await Promise.all([this.bash instanceof PtyBash ? this.bash.start() : undefined, this.python?.ready()]);
    return { warm: true };
  }

  /** Serves the inherited connection (conn_fd), else listens on the socket path (a stale socket file is unlinked first). */
  listen(): Promise<void> {
    if (this.opts.conn_fd !== undefined) {
      const sock = new net.Socket({ fd: this.opts.conn_fd, readable: true, writable: true });
      // The host went away: nothing else can ever reach this tool server.
      sock.on('close', () => void this.close().then(this.onShutdown));
      this.serve(sock);
      // Readiness goes over the connection itself: the sandbox's stdio is not connected to the host.
      sock.write(JSON.stringify({ ready: true, pid: process.pid }) + '\n');
      return Promise.resolve();
    }
    try {
      fs.unlinkSync(this.opts.socket);
    } catch {
      /* none */
    }
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.socket, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  private serve(sock: net.Socket): void {
    let buf = '';
    let skipping = false;
    sock.setEncoding('utf8');
    sock.on('error', () => undefined);
    this.sockets.add(sock);
    sock.on('close', () => this.sockets.delete(sock));
    const send = (r: ToolResponse): void => {
      if (!sock.destroyed) sock.write(JSON.stringify(r) + '\n');
    };
    sock.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (skipping) {
          skipping = false;
          continue;
        }
        if (line.trim()) void this.handle(line, send);
      }
      // A line past the limit is refused without buffering the rest of it.
      if (buf.length > this.maxInput + 4096) {
        buf = '';
        skipping = true;
        send({
          id: null,
          ok: false,
          error: {
            code: 'tool_error',
            message: `request line longer than ${this.maxInput} bytes; send smaller commands or write the content with the editor in parts`,
          },
        });
      }
    });
  }

  private async handle(line: string, send: (r: ToolResponse) => void): Promise<void> {
    let req: Record<string, unknown>;
    try {
      req = JSON.parse(line) as Record<string, unknown>;
      if (!req || typeof req !== 'object' || Array.isArray(req)) throw new Error('not an object');
    } catch (e) {
      return send({
        id: null,
        ok: false,
        error: { code: 'tool_error', message: `malformed request (not a JSON object): ${(e as Error).message}` },
      });
    }
    const id = typeof req.id === 'number' ? req.id : null;
    try {
      const result = await this.dispatch(req as ToolRequest, id);
      send({ id, ok: true, result });
    } catch (e) {
      const code = e instanceof ToolLimitError ? 'sandbox_limit' : e instanceof ToolInputError ? 'tool_error' : 'sandbox_error';
      send({ id, ok: false, error: { code, message: (e as Error).message } });
    } finally {
      if (id !== null) this.inflight.delete(id);
      if (this.warmAfterFirstAnswer) {
        this.warmAfterFirstAnswer = false;
        setImmediate(() => this.warm());
      }
    }
  }

  /**
   * One request, by the tool it names. The line came from the host's client, typed by ToolCalls;
   * each field is still checked here, since a malformed line must answer an error, never throw.
   */
  private async dispatch(req: ToolRequest, id: number | null): Promise<ToolCalls[ToolName]['answer']> {
    const tool = req.tool;
    const need = <T>(x: T | undefined, name: string): T => {
      if (!x) throw new ToolInputError(`tool ${name} is not enabled in this sandbox`);
      return x;
    };
    const bytes = (s: unknown, name: string): string => {
      if (typeof s !== 'string') throw new ToolInputError(`${name} must be a string`);
      if (Buffer.byteLength(s) > this.maxInput)
        throw new ToolInputError(`${name} is ${Buffer.byteLength(s)} bytes, over the limit of ${this.maxInput}`);
      return s;
    };
    const seconds = (v: unknown, name: string): number | undefined => {
      if (v === undefined || v === null) return undefined;
      if (typeof v !== 'number' || !(v > 0)) throw new ToolInputError(`${name} must be a positive number of seconds`);
      return v;
    };
    switch (tool) {
      case 'ping':
        return { pong: true };
      case 'configure':
        return this.configure(req);
      case 'warm':
        return this.warmNow();
      case 'bash': {
        const bash = need(this.bash, 'bash');
        const command = bytes(req.command ?? '', 'command');
        const args = {
          command,
          timeout_s: seconds(req.timeout_s, 'timeout_s'),
          no_change_timeout_s: seconds(req.no_change_timeout_s, 'no_change_timeout_s'),
          is_input: req.is_input === true,
        };
        this.used = true;
        await this.settled(id, 'bash');
        return this.checkDisk(await this.track(id, 'bash', () => bash.interrupt(), bash.run(args)));
      }
      case 'python': {
        const py = need(this.python, 'python');
        const code = bytes(req.code, 'code');
        const timeout = seconds(req.timeout_s, 'timeout_s');
        this.used = true;
        await this.settled(id, 'python');
        return this.checkDisk(await this.track(id, 'python', () => py.interrupt(), py.run(code, timeout)));
      }
      case 'edit': {
        const ed = need(this.editor, 'editor');
        if (!req.op || typeof req.op !== 'object') throw new ToolInputError('op must be an object with a command');
        const op = req.op as Record<string, unknown>;
        for (const k of ['file_text', 'old_str', 'new_str']) if (op[k] !== undefined) bytes(op[k], k);
        return this.checkDisk(await ed.run(op));
      }
      case 'read_file': {
        const max =
          typeof req.max_bytes === 'number' && req.max_bytes > 0
            ? Math.floor(req.max_bytes)
            : (this.opts.max_read_bytes ?? DEFAULT_MAX_READ);
        return readFileCapped(this.opts.workspace, req.path, max);
      }
      case 'write_files':
        return writeFiles(this.opts.workspace, req.files, req.append === true);
      case 'exec': {
        if (req.stdin !== undefined) bytes(req.stdin, 'stdin');
        let kill: () => void = () => undefined;
        const done = execProcess(this.opts, req as never, (k) => (kill = k));
        if (id !== null) this.inflight.set(id, { tool: 'exec', interrupt: () => kill() });
        const r = await done;
        this.checkDisk();
        return r;
      }
      case 'cancel': {
        const call = this.inflight.get(Number(req.target));
        if (!call) return { cancelled: false };
        if (call.done) {
          const settle = call.done.catch(() => undefined);
          this.settling.set(call.tool, settle);
          void settle.then(() => this.settling.get(call.tool) === settle && this.settling.delete(call.tool));
        }
        call.interrupt();
        return { cancelled: true };
      }
      case 'shutdown':
        setImmediate(() => void this.close().then(this.onShutdown));
        return { stopping: true };
      default:
        throw new ToolInputError(
          `unknown tool ${JSON.stringify(tool)}: use bash, python, edit, read_file, write_files, exec, ping, configure, warm, cancel or shutdown`,
        );
    }
  }

  /**
   * The workspace is a tmpfs capped at sandbox.disk_mb: once it is full, the call that filled it is
   * answered with a `sandbox_limit` error, which ends the job with that limit named.
   */
  private checkDisk<T>(result?: T): T {
    if (this.opts.disk_mb !== undefined) {
      const free = freeBytes(this.opts.workspace);
      if (free !== undefined && free < 64 * 1024) {
        throw new ToolLimitError(`the workspace is full: it reached its size limit of ${this.opts.disk_mb} MB (sandbox.disk_mb)`);
      }
    }
    return result as T;
  }

  private track<T>(id: number | null, tool: 'bash' | 'python' | 'exec', interrupt: () => void, done: Promise<T>): Promise<T> {
    if (id !== null) this.inflight.set(id, { tool, interrupt, done });
    return done;
  }

  /**
   * Waits (at most 3 s) for a cancelled call of the same tool to unwind before the next one runs.
   * A call cancelled while it waits never runs.
   */
  private async settled(id: number | null, tool: 'bash' | 'python'): Promise<void> {
    const s = this.settling.get(tool);
    if (!s) return;
    let cancelled = false;
    if (id !== null) this.inflight.set(id, { tool, interrupt: () => void (cancelled = true) });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([s, new Promise((r) => (timer = setTimeout(r, 3000)))]);
    clearTimeout(timer);
    if (cancelled) throw new ToolInputError('cancelled before it started');
  }

  /**
   * Starts bash and python in the background so a later command does not pay for their start. Run
   * after the first answer, not at start: spawning (a synchronous fork) would delay that answer. A
   * failure here surfaces on the next real request.
   */
  warm(): void {
    if (this.closing) return;
    if (this.bash instanceof PtyBash) this.bash.start().catch(() => undefined);
    this.python?.warm();
  }

  /** Stops the children and the listener. Safe twice. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.bash?.close();
    this.python?.close();
    // server.close() waits for open connections: end them, after the shutdown answer is flushed.
    const closed = this.server.listening ? new Promise<void>((r) => this.server.close(() => r())) : Promise.resolve();
    for (const s of this.sockets) s.end();
    await closed;
  }
}
