import type { SidecarLog } from './types.js';

/** Log levels, quietest last. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, silent: 4 };

/** A SidecarLog writing `raas sidecar: <level>: <msg>` lines to stderr (never stdout). */
export class StderrLog implements SidecarLog {
  private sink?: (msg: string, data?: Record<string, unknown>) => void;
  constructor(
    private readonly level: LogLevel = 'info',
    private readonly write: (text: string) => void = (t) => void process.stderr.write(t),
  ) {}

  info(msg: string): void {
    this.line('info', msg);
  }
  warn(msg: string, data?: Record<string, unknown>): void {
    this.line('warn', msg);
    this.sink?.(msg, data);
  }
  error(msg: string): void {
    this.line('error', msg);
  }
  setWarningSink(sink: ((msg: string, data?: Record<string, unknown>) => void) | undefined): void {
    this.sink = sink;
  }

  private line(level: LogLevel, msg: string): void {
    if (RANK[level] >= RANK[this.level]) this.write(`raas sidecar: ${level}: ${msg}\n`);
  }
}
