import { PassThrough } from 'node:stream';
import { runSidecar } from '../../src/sidecar/run.js';
import type { SidecarBackend, SidecarLog } from '../../src/sidecar/types.js';
import { StderrLog } from '../../src/sidecar/log.js';

/** A sidecar served in-process over streams, with what it wrote parsed line by line. */
export interface Harness {
  lines: any[];
  send(obj: unknown): void;
  raw(text: string): void;
  end(): void;
  /** Resolves with the answer to `id` once it was written. */
  answer(id: string | number | null, nth?: number): Promise<any>;
  done: Promise<void>;
  stderr: string[];
}

export function harness(backend: SidecarBackend, opts: { maxLineBytes?: number; progressIntervalMs?: number } = {}): Harness {
  const input = new PassThrough();
  const lines: any[] = [];
  const stderr: string[] = [];
  const waiters: Array<() => void> = [];
  const log: SidecarLog = new StderrLog('debug', (t) => void stderr.push(t));
  const done = runSidecar({
    backend,
    input,
    log,
    maxLineBytes: opts.maxLineBytes,
    progressIntervalMs: opts.progressIntervalMs ?? 0,
    writeLine: async (line) => {
      if (line.includes('\n')) throw new Error('a protocol line contains a newline');
      lines.push(JSON.parse(line));
      waiters.splice(0).forEach((w) => w());
    },
  });
  const answer = (id: string | number | null, nth = 0): Promise<any> =>
    new Promise((resolve) => {
      const check = (): void => {
        const found = lines.filter((l) => 'ok' in l && l.id === id);
        if (found.length > nth) resolve(found[nth]);
        else waiters.push(check);
      };
      check();
    });
  return {
    lines,
    stderr,
    send: (obj) => input.write(JSON.stringify(obj) + '\n'),
    raw: (text) => input.write(text),
    end: () => input.end(),
    answer,
    done,
  };
}
