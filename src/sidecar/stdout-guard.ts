/**
 * Keeps stdout for protocol lines only. Anything else in this process that writes to
 * `process.stdout` (console.log in a library, a progress bar) is redirected to stderr, and the
 * first such write is reported once through `onStray` so the trainer learns about it.
 * Child processes must not inherit fd 1; the sidecar's own children use pipes.
 */
export interface StdoutGuard {
  /** Writes one protocol line to the real stdout; resolves once it is handed to the OS. */
  writeLine(line: string): Promise<void>;
  /** Puts the original `process.stdout.write` back. */
  restore(): void;
}

/** Installs the guard on `process.stdout`. */
export function guardStdout(onStray: (bytes: number) => void): StdoutGuard {
  const stdout = process.stdout;
  const original = stdout.write;
  const real = original.bind(stdout) as (chunk: string, cb: (err?: Error | null) => void) => boolean;
  let reported = false;
  stdout.write = function strayWrite(chunk: unknown, ...rest: unknown[]): boolean {
    const bytes = typeof chunk === 'string' ? Buffer.byteLength(chunk) : (chunk as Uint8Array).length;
    if (!reported) {
      reported = true;
      onStray(bytes);
    }
    return (process.stderr.write as (...a: unknown[]) => boolean)(chunk, ...rest);
  } as typeof stdout.write;
  return {
    writeLine: (line) =>
      new Promise((resolve, reject) => {
        real(line + '\n', (err) => (err ? reject(err) : resolve()));
      }),
    restore: () => {
      stdout.write = original;
    },
  };
}
