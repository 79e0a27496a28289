import { spawn } from 'node:child_process';
import { UpdateWeightsRequest } from '../protocol/batch.js';
import { CancelledError, RaasError, fieldPath } from '../protocol/errors.js';

/** Outcome of one trainer command run. */
export interface TrainerRun {
  /** Parsed from the last non-empty stdout line when it is JSON; `{}` otherwise. */
  update: UpdateWeightsRequest;
  stdoutTail: string;
}

/** Thrown when the trainer command exits non-zero: the run stops with its exit code. */
export class TrainerCommandError extends RaasError {
  constructor(
    readonly exitCode: number,
    readonly stderrTail: string,
    command: string,
  ) {
    super('internal', `trainer.command failed with exit code ${exitCode}: ${command}\n--- stderr (tail) ---\n${stderrTail}`, {
      retryable: false,
    });
    this.name = 'TrainerCommandError';
  }
}

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** Substitutes `{batch_path}`, `{step}` and `{run_dir}` (shell-quoted) into the command. */
export function renderCommand(template: string, vars: { batch_path: string; step: number; run_dir: string }): string {
  return template
    .replaceAll('{batch_path}', quote(vars.batch_path))
    .replaceAll('{run_dir}', quote(vars.run_dir))
    .replaceAll('{step}', String(vars.step));
}

/**
 * Runs the trainer command through /bin/sh in its own process group (so Ctrl-C or an abort stops
 * the whole tree). Its last stdout line may be JSON `{version?, weight_version?, backends?}`.
 */
export function runTrainerCommand(
  command: string,
  opts: { cwd?: string; env?: Record<string, string>; signal?: AbortSignal },
): Promise<TrainerRun> {
  return new Promise((resolve, reject) => {
    opts.signal?.throwIfAborted();
    const child = spawn('/bin/sh', ['-c', command], {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    const keep = (s: string, chunk: Buffer): string => (s + chunk.toString('utf8')).slice(-64 * 1024);
    child.stdout.on('data', (c: Buffer) => (stdout = keep(stdout, c)));
    child.stderr.on('data', (c: Buffer) => (stderr = keep(stderr, c)));
    const kill = (): void => {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // already gone
      }
    };
    const onAbort = (): void => kill();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (err) => {
      opts.signal?.removeEventListener('abort', onAbort);
      reject(new RaasError('config_invalid', `trainer.command: cannot start /bin/sh: ${err.message}`, { retryable: false }));
    });
    child.on('close', (code, sig) => {
      opts.signal?.removeEventListener('abort', onAbort);
      if (opts.signal?.aborted) return reject(new CancelledError('trainer command interrupted'));
      const tail = stderr.split('\n').slice(-20).join('\n').slice(-4000);
      if (code !== 0) return reject(new TrainerCommandError(code ?? (sig ? 128 + 15 : 1), tail, command));
      const last =
        stdout
          .trim()
          .split('\n')
          .filter((l) => l.trim())
          .at(-1) ?? '';
      let update: UpdateWeightsRequest = {};
      if (last.startsWith('{')) {
        let json: unknown;
        try {
          json = JSON.parse(last);
        } catch {
          return reject(
            new RaasError('bad_request', `trainer.command: last stdout line looks like JSON but does not parse: ${last.slice(0, 200)}`, {
              retryable: false,
            }),
          );
        }
        const r = UpdateWeightsRequest.safeParse(json);
        if (!r.success) {
          const i = r.error.issues[0]!;
          return reject(
            new RaasError(
              'bad_request',
              `trainer.command: last stdout line: ${fieldPath(i.path)}: ${i.message}; expected {version?, weight_version?, backends?}`,
              { retryable: false },
            ),
          );
        }
        update = r.data;
      }
      resolve({ update, stdoutTail: stdout.slice(-2000) });
    });
  });
}
