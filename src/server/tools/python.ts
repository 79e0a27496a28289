import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Writable, Readable } from 'node:stream';
import { PYTHON_DRIVER } from './python-driver.js';
import { withLimits } from './limits.js';
import { capText } from './output-cap.js';
import { ToolInputError } from './bash-pty.js';
import type { PythonAnswer, ToolServerOptions } from './protocol.js';

export type { PythonAnswer } from './protocol.js';

interface DriverReply {
  id: number;
  stdout: string;
  stderr: string;
  result?: string;
  error?: PythonAnswer['error'];
}

/** The driver's extra pipes (fd 3 requests, fd 5 interrupts). */
const fd = (child: ChildProcess, i: number): Writable => (child.stdio as unknown as Writable[])[i];

const DEFAULT_TIMEOUT_S = 120;
/** After an interrupt, how long the code gets to unwind before the interpreter is restarted. */
const INTERRUPT_GRACE_MS = 3000;

/** A persistent python3 interpreter driven over fds 3/4/5. One cell at a time. */
export class PythonKernel {
  private child: ChildProcess | undefined;
  private pending: { id: number; resolve: (r: DriverReply | null) => void; fdOut: string[] } | undefined;
  private seq = 0;
  private driverPath: string | undefined;
  private busy = false;
  private closed = false;

  constructor(private readonly opts: ToolServerOptions) {}

  /** Starts the interpreter ahead of the first cell (the tool server warms enabled tools after it is ready). */
  warm(): void {
    if (!this.child && !this.closed && existsSync(this.interpreter())) this.start();
  }

  /** The interpreter's path (an image-rooted sandbox names its image's). */
  private interpreter(): string {
    return this.opts.python ?? '/usr/bin/python3';
  }

  /** Starts the interpreter and waits until it ran an empty cell (nothing in its namespace changes). */
  async ready(): Promise<void> {
    if (this.closed || this.busy) return;
    this.busy = true;
    try {
      await this.exec('', DEFAULT_TIMEOUT_S * 1000);
    } finally {
      this.busy = false;
    }
  }

  private start(): ChildProcess {
    const py = this.interpreter();
    // The driver goes through a file so the process table shows a short command line.
    this.driverPath ??= path.join(this.opts.tmp_dir ?? '/tmp', `.raas-python-driver-${process.pid}.py`);
    writeFileSync(this.driverPath, PYTHON_DRIVER, { mode: 0o600 });
    const [file, args] = withLimits(this.opts, [py, '-u', this.driverPath]);
    const child = spawn(file, args, {
      cwd: this.opts.workspace,
      env: { ...(this.opts.env ?? {}), PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    const replies = createInterface({ input: child.stdio[4] as Readable });
    replies.on('line', (line) => {
      let rep: DriverReply;
      try {
        rep = JSON.parse(line) as DriverReply;
      } catch {
        return;
      }
      const p = this.pending;
      if (p && p.id === rep.id) {
        this.pending = undefined;
        p.resolve(rep);
      }
    });
    // Output written straight to fd 1/2 (child processes, C extensions) is attached to the running cell.
    const onFd = (d: Buffer): void => void this.pending?.fdOut.push(d.toString('utf8'));
    child.stdout!.on('data', onFd);
    child.stderr!.on('data', onFd);
    child.on('error', () => undefined);
    child.on('exit', () => {
      if (this.child === child) this.child = undefined;
      const p = this.pending;
      this.pending = undefined;
      p?.resolve(null);
    });
    for (const i of [3, 5]) fd(child, i).on('error', () => undefined);
    this.child = child;
    return child;
  }

  /** Runs one cell. A timeout interrupts it (KeyboardInterrupt) and keeps the interpreter's state. */
  async run(code: string, timeoutS?: number): Promise<PythonAnswer> {
    if (this.closed) throw new ToolInputError('python is closed');
    if (this.busy) throw new ToolInputError('another python cell is still running; python runs one cell at a time');
    if (typeof code !== 'string') throw new ToolInputError('code must be a string');
    // An image-rooted sandbox may have no python (busybox, distroless): say so instead of a failed start.
    if (!this.child && !existsSync(this.interpreter()))
      throw new ToolInputError(
        `this sandbox has no ${this.interpreter()} (its image has no python): the python tool needs an interpreter; bash and exec run without it`,
      );
    this.busy = true;
    try {
      return await this.exec(code, (timeoutS ?? DEFAULT_TIMEOUT_S) * 1000);
    } finally {
      this.busy = false;
    }
  }

  private async exec(code: string, timeoutMs: number): Promise<PythonAnswer> {
    const child = this.child ?? this.start();
    const id = ++this.seq;
    const fdOut: string[] = [];
    const reply = new Promise<DriverReply | null>((resolve) => (this.pending = { id, resolve, fdOut }));
    fd(child, 3).write(JSON.stringify({ id, code }) + '\n');
    let timedOut = false;
    let restartTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      fd(child, 5).write(`${id}\n`);
      // Code that swallows KeyboardInterrupt or blocks in C: restart the interpreter (state is lost).
      restartTimer = setTimeout(() => child.kill('SIGKILL'), INTERRUPT_GRACE_MS);
    }, timeoutMs);
    const rep = await reply;
    clearTimeout(timer);
    clearTimeout(restartTimer);
    const cap = this.opts.output_cap ?? 30_000;
    if (!rep) {
      return {
        stdout: capText(fdOut.join(''), cap).text,
        stderr: '',
        error: {
          type: timedOut ? 'TimeoutError' : 'InterpreterExited',
          message: timedOut
            ? 'the cell ignored the interrupt; the interpreter was restarted and its state is lost'
            : 'the interpreter exited; its state is lost',
          traceback: '',
        },
        timed_out: timedOut,
      };
    }
    const a: PythonAnswer = {
      stdout: capText(String(rep.stdout ?? '') + fdOut.join(''), cap).text,
      stderr: capText(String(rep.stderr ?? ''), cap).text,
      timed_out: timedOut,
    };
    // The reply comes from the task's own process (it can write fd 4 itself): every field is capped
    // and forced to a string, never trusted for size or shape.
    if (rep.result !== undefined) a.result = capText(String(rep.result), cap).text;
    if (rep.error) {
      a.error = {
        type: capText(String(rep.error.type ?? ''), 200).text,
        message: capText(String(rep.error.message ?? ''), cap).text,
        traceback: capText(String(rep.error.traceback ?? ''), cap).text,
      };
    }
    return a;
  }

  /** Interrupts the running cell (client cancel). */
  interrupt(): void {
    const p = this.pending;
    if (p && this.child) fd(this.child, 5).write(`${p.id}\n`);
  }

  close(): void {
    this.closed = true;
    this.child?.kill('SIGKILL');
    this.child = undefined;
  }
}
