import { spawn } from 'node:child_process';
import path from 'node:path';
import { ToolInputError } from './bash-pty.js';
import { withLimits } from './limits.js';
import type { ExecAnswer, ExecRequest, ToolServerOptions } from './protocol.js';

export type { ExecAnswer, ExecRequest } from './protocol.js';

const DEFAULT_TIMEOUT_S = 600;
const DEFAULT_MAX_OUTPUT = 16 << 20;

/** Keeps at most `cap` bytes of a stream, counting what was dropped. */
class Collect {
  private readonly parts: Buffer[] = [];
  private n = 0;
  dropped = 0;
  constructor(private readonly cap: number) {}
  push(b: Buffer): void {
    const room = this.cap - this.n;
    if (room <= 0) {
      this.dropped += b.length;
      return;
    }
    const keep = b.length <= room ? b : b.subarray(0, room);
    this.parts.push(keep);
    this.n += keep.length;
    this.dropped += b.length - keep.length;
  }
  text(): string {
    return Buffer.concat(this.parts).toString('utf8');
  }
}

/**
 * Runs one fresh process (argv, no shell unless argv names one) under the sandbox's resource limits,
 * outside the agent's persistent shell: its functions, aliases and variables do not apply. The
 * process gets its own process group, which a timeout kills whole.
 */
export function execProcess(opts: ToolServerOptions, req: ExecRequest, onInterrupt: (kill: () => void) => void): Promise<ExecAnswer> {
  const argv = req.argv;
  if (!Array.isArray(argv) || argv.length === 0 || argv.some((a) => typeof a !== 'string' || a.includes('\0'))) {
    throw new ToolInputError('argv must be a non-empty list of strings');
  }
  if (req.env !== undefined && (typeof req.env !== 'object' || Object.values(req.env).some((v) => typeof v !== 'string'))) {
    throw new ToolInputError('env must be an object of strings');
  }
  if (req.stdin !== undefined && typeof req.stdin !== 'string') throw new ToolInputError('stdin must be a string');
  const cwd = req.cwd === undefined ? opts.workspace : path.resolve(opts.workspace, String(req.cwd));
  const timeoutS = req.timeout_s ?? DEFAULT_TIMEOUT_S;
  const cap = Math.max(1, Math.min(req.max_output_bytes ?? DEFAULT_MAX_OUTPUT, DEFAULT_MAX_OUTPUT * 4));
  const [file, args] = withLimits(opts, argv);
  return new Promise<ExecAnswer>((resolve) => {
    const child = spawn(file, args, {
      cwd,
      env: { ...(opts.env ?? {}), ...(req.env ?? {}) },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const out = new Collect(cap);
    const err = new Collect(cap);
    let timedOut = false;
    const killGroup = (): void => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeoutS * 1000);
    onInterrupt(killGroup);
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => err.push(d));
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(req.stdin ?? '');
    let done = false;
    const finish = (code: number | null, sig: NodeJS.Signals | null, spawnError?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      killGroup();
      resolve({
        exit_code: code,
        signal: sig,
        stdout: out.text(),
        stderr: spawnError ? `cannot run ${argv[0]}: ${spawnError.message}` : err.text(),
        timed_out: timedOut,
        truncated: out.dropped + err.dropped > 0,
      });
    };
    child.once('error', (e) => finish(127, null, e));
    child.once('exit', (code, sig) => {
      // Whatever the process left behind in its group ends with it; its pipes then close.
      killGroup();
      const grace = setTimeout(() => finish(code, sig), 1000);
      child.once('close', () => {
        clearTimeout(grace);
        finish(code, sig);
      });
    });
  });
}
