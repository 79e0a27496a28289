import type { IPty } from 'node-pty';
import { existsSync, writeFileSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { CappedText } from './output-cap.js';
import { withLimits } from './limits.js';
import type { BashAnswer, BashRequest, ToolServerOptions } from './protocol.js';
import { randomHex } from './random.js';

export type { BashAnswer, BashRequest } from './protocol.js';

/** A refusal the tool server answers as a `tool_error` (bad input, busy shell). */
export class ToolInputError extends Error {}

/** Keystroke names accepted with `is_input` (as in OpenHands). */
const KEYS: Record<string, string> = { 'C-c': '\x03', 'C-d': '\x04', 'C-z': '\x1a', 'C-\\': '\x1c' };
/** Canonical-mode terminals cut input lines at 4096 bytes; longer commands go through a file. */
const MAX_TTY_LINE = 4000;
const DEFAULT_TIMEOUT_S = 120;
/** How long to wait for the prompt after Ctrl-C before asking again with an empty line. */
const INTERRUPT_WAIT_MS = 1000;

interface Waiter {
  onMarker(code: number): void;
  onExit(): void;
}

/**
 * One persistent bash on a PTY. The end of each command is a sentinel that PROMPT_COMMAND prints
 * with the exit code, so commands that read stdin cannot swallow it; completion is detected from
 * PTY data events, never by polling.
 */
export class PtyBash {
  private pty: IPty | undefined;
  private readonly nonce = randomHex(6);
  private readonly marker: RegExp;
  private readonly markerHead: string;
  private carry = '';
  private out: CappedText;
  /** A command is executing in the shell (sent, no sentinel yet). */
  private running = false;
  /** A request is waiting for its answer. */
  private busy = false;
  private waiter: Waiter | undefined;
  /** Output and exit code of a command that finished after its answer was given (no-change timeout). */
  private finished: { code: number } | undefined;
  private seq = 0;
  private tmpFile: string | undefined;
  private closed = false;

  constructor(private readonly opts: ToolServerOptions) {
    this.markerHead = `\x1eRAAS_${this.nonce}_`;
    this.marker = new RegExp(`\\x1eRAAS_${this.nonce}_(\\d+)\\x1f`);
    this.out = new CappedText(opts.output_cap ?? 30_000);
  }

  private starting: Promise<void> | undefined;

  /** Starts the shell (once; concurrent callers share the start) and waits for its first prompt. */
  start(): Promise<void> {
    if (this.pty && !this.starting) return Promise.resolve();
    this.starting ??= this.spawnShell().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async spawnShell(): Promise<void> {
    // An image-rooted sandbox may have no bash (busybox, distroless): say so instead of a spawn error.
    if (!existsSync('/bin/bash'))
      throw new ToolInputError(
        'this sandbox has no /bin/bash (its image has none): the bash tool needs bash; exec and python run without it',
      );
    const env: Record<string, string> = { ...(this.opts.env ?? {}), PS1: '', PS2: '', PAGER: 'cat', GIT_PAGER: 'cat', HISTFILE: '' };
    const [file, args] = withLimits({ ...this.opts, shell: '/bin/bash' }, ['/bin/bash', '--noprofile', '--norc', '--noediting', '-i']);
    // Loaded on first use: a sandbox that never runs bash starts without the native module.
    const { spawn: spawnPty } = await import('node-pty');
    const pty = spawnPty(file, args, { name: env.TERM ?? 'xterm', cols: 250, rows: 50, cwd: this.opts.workspace, env });
    this.pty = pty;
    pty.onData((d) => this.onData(d));
    pty.onExit(() => this.onExit());
    const ready = new Promise<void>((resolve, reject) => {
      this.waiter = { onMarker: () => resolve(), onExit: () => reject(new Error('bash exited during start')) };
    });
    // The setup line itself is echoed (echo is still on); everything before the first sentinel is dropped.
    // readonly: a command that assigns PROMPT_COMMAND gets an error instead of silencing the sentinel.
    pty.write(
      `stty -echo -onlcr; PROMPT_COMMAND='printf "\\036RAAS_${this.nonce}_%s\\037" "$?"'; readonly PROMPT_COMMAND; PS1=''; PS2=''\n`,
    );
    await ready;
    this.waiter = undefined;
    this.out = new CappedText(this.opts.output_cap ?? 30_000);
  }

  private onData(chunk: string): void {
    const s = this.carry + chunk;
    this.carry = '';
    const m = this.marker.exec(s);
    if (m) {
      this.out.append(s.slice(0, m.index));
      const rest = s.slice(m.index + m[0].length);
      this.running = false;
      const code = Number(m[1]);
      const w = this.waiter;
      if (w) w.onMarker(code);
      else this.finished = { code };
      if (rest) this.onData(rest);
      return;
    }
    // Keep a possible partial sentinel for the next chunk.
    const at = s.lastIndexOf('\x1e');
    if (at >= 0 && s.length - at < this.markerHead.length + 12 && this.markerHead.startsWith(s.slice(at, at + this.markerHead.length))) {
      this.out.append(s.slice(0, at));
      this.carry = s.slice(at);
    } else {
      this.out.append(s);
    }
  }

  private onExit(): void {
    this.pty = undefined;
    this.running = false;
    this.waiter?.onExit();
  }

  /** Runs one command (or sends keystrokes with `is_input`). One at a time: a second call is refused. */
  async run(req: BashRequest): Promise<BashAnswer> {
    if (this.busy) throw new ToolInputError('another bash command is still waiting for its answer; bash runs one command at a time');
    if (this.closed) throw new ToolInputError('bash is closed');
    this.busy = true;
    try {
      if (!this.pty || this.starting) await this.start();
      return await this.exec(req);
    } finally {
      this.busy = false;
    }
  }

  private async exec(req: BashRequest): Promise<BashAnswer> {
    const pty = this.pty!;
    const command = req.command ?? '';
    if (req.is_input || (command === '' && this.running)) {
      if (!this.running) {
        if (this.finished) return this.answer(this.takeFinished(), false);
        throw new ToolInputError(
          'no command is running: is_input sends keystrokes to a running program; send the command without is_input',
        );
      }
      if (command) pty.write(KEYS[command] ?? command + '\n');
    } else {
      if (this.running) {
        throw new ToolInputError(
          'the previous command is still running; send keystrokes with is_input (for example "C-c" to interrupt it) or an empty command to read more output',
        );
      }
      if (command.trim() === '') throw new ToolInputError('command is empty');
      this.finished = undefined;
      this.out = new CappedText(this.opts.output_cap ?? 30_000);
      this.running = true;
      pty.write(this.framed(command));
    }
    return this.wait(req);
  }

  /** Single lines go as typed; multi-line commands as one brace group so the sentinel fires once. */
  private framed(command: string): string {
    const long = command.split('\n').some((l) => Buffer.byteLength(l) > MAX_TTY_LINE);
    if (long) {
      this.cleanupTmp();
      this.tmpFile = path.join(this.opts.tmp_dir ?? '/tmp', `.raas-cmd-${this.nonce}-${++this.seq}.sh`);
      writeFileSync(this.tmpFile, command + '\n', { mode: 0o600 });
      return `. '${this.tmpFile}'\n`;
    }
    return command.includes('\n') ? `{\n${command}\n}\n` : command + '\n';
  }

  private takeFinished(): number {
    const code = this.finished!.code;
    this.finished = undefined;
    return code;
  }

  private answer(code: number | null, timedOut: boolean): BashAnswer {
    const truncated = this.out.truncated;
    const output = this.out.toString();
    this.out = new CappedText(this.opts.output_cap ?? 30_000);
    const a: BashAnswer = { output, exit_code: code, timed_out: timedOut, truncated };
    if (this.running) a.running = true;
    if (code !== null || !this.running) this.cleanupTmp();
    return a;
  }

  private wait(req: BashRequest): Promise<BashAnswer> {
    return new Promise<BashAnswer>((resolve) => {
      const timers: NodeJS.Timeout[] = [];
      let lastLen = this.out.length;
      let settled = false;
      const done = (a: BashAnswer): void => {
        if (settled) return;
        settled = true;
        for (const t of timers) clearTimeout(t);
        clearInterval(watch);
        this.waiter = undefined;
        resolve(a);
      };
      this.waiter = {
        onMarker: (code) => done(this.answer(code, false)),
        onExit: () =>
          done({ ...this.answer(null, false), output: this.out.toString() + '\n[bash exited; a new shell starts with the next command]' }),
      };
      const hard = (req.timeout_s ?? DEFAULT_TIMEOUT_S) * 1000;
      timers.push(setTimeout(() => this.onTimeout(done, () => settled), hard));
      // The no-change timeout answers without interrupting; the command keeps running.
      const ncMs = req.no_change_timeout_s ? req.no_change_timeout_s * 1000 : 0;
      let since = Date.now();
      const watch = setInterval(
        () => {
          if (!ncMs) return;
          const len = this.out.length;
          if (len !== lastLen) {
            lastLen = len;
            since = Date.now();
          } else if (Date.now() - since >= ncMs) done(this.answer(null, false));
        },
        Math.max(10, Math.min(250, ncMs / 4)),
      );
    });
  }

  /** Hard timeout: Ctrl-C, then wait for the prompt so the shell is ready for the next command. */
  private onTimeout(done: (a: BashAnswer) => void, settled: () => boolean): void {
    const pty = this.pty;
    if (!pty) return;
    let tries = 0;
    const finish = (): void => done(this.answer(null, true));
    this.waiter = { onMarker: () => finish(), onExit: () => finish() };
    const kick = (): void => {
      // After Ctrl-C the terminal discards queued input; an empty line asks for the prompt again.
      pty.write(tries === 1 ? '\n' : '\x03');
      if (++tries > 3) return finish();
      setTimeout(() => (settled() ? undefined : kick()), INTERRUPT_WAIT_MS).unref();
    };
    kick();
  }

  /** Interrupts the running command (client cancel). */
  interrupt(): void {
    if (this.running) this.pty?.write('\x03');
  }

  private cleanupTmp(): void {
    if (!this.tmpFile) return;
    try {
      unlinkSync(this.tmpFile);
    } catch {
      /* already gone */
    }
    this.tmpFile = undefined;
  }

  close(): void {
    this.closed = true;
    this.cleanupTmp();
    try {
      this.pty?.kill('SIGKILL');
    } catch {
      /* exited */
    }
    this.pty = undefined;
  }
}
