import type { SidecarLog } from './types.js';

/** Log levels, quietest last. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, silent: 4 };

/** A SidecarLog writing `raas sidecar: <level>: <msg>` lines to stderr (never stdout). */
export class StderrLog implements SidecarLog {
  private sink?: (msg: string, data?: Record<string, unknown>) => void;
  /** Warnings logged before a sink exists (at start), delivered when one is set. */
  private early: Array<[string, Record<string, unknown> | undefined]> = [];
  constructor(
    private readonly level: LogLevel = 'info',
    private readonly write: (text: string) => void = (t) => void process.stderr.write(t),
  ) {}

  info(msg: string): void {
    this.line('info', msg);
  }
  warn(msg: string, data?: Record<string, unknown>): void {
    this.line('warn', msg);
    if (this.sink) this.sink(msg, data);
    else if (this.early.length < 100) this.early.push([msg, data]);
  }
  error(msg: string): void {
    this.line('error', msg);
  }
  setWarningSink(sink: ((msg: string, data?: Record<string, unknown>) => void) | undefined): void {
    this.sink = sink;
    if (sink) for (const [msg, data] of this.early.splice(0)) sink(msg, data);
  }

  private line(level: LogLevel, msg: string): void {
    if (RANK[level] >= RANK[this.level]) this.write(`raas sidecar: ${level}: ${msg}\n`);
  }
}
