import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSandboxRuntime } from '../../src/server/sandbox/index.js';
import type { Sandbox, SandboxRuntime, SandboxSpec } from '../../src/server/sandbox/types.js';
import type { JobInfo, Logger, StageContext } from '../../src/server/handlers/types.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';
import { normaliseRow } from '../../src/protocol/tasks.js';

/** Repository root and the dataset folder. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const DATA = path.join(ROOT, 'configs/data');

/** Rows of a JSONL dataset under configs/data. */
export function readJsonl(name: string): Record<string, unknown>[] {
  return fs
    .readFileSync(path.join(DATA, name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A bwrap runtime rooted where the sandbox user can reach it (as root: under /var/tmp); dispose() closes it and removes the root. */
export function bwrapRuntime(name: string): SandboxRuntime & { dispose(): Promise<void> } {
  const base = process.getuid?.() === 0 ? '/var/tmp' : fs.realpathSync(process.env.TMPDIR ?? '/tmp');
  const root = `${base}/raas-t-h4-${name}-${process.pid}`;
  const rt = createSandboxRuntime({ runtime: 'bwrap', root });
  return Object.assign(rt, {
    async dispose() {
      await rt.close();
      fs.rmSync(root, { recursive: true, force: true });
    },
  });
}

const noop = (): void => undefined;
/** A logger that drops everything. */
export const quietLog: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/**
 * A StageContext over a real runtime, for calling a handler's stages directly. Like the pipeline,
 * it closes every sandbox the stage opened when `closeAll` runs.
 */
export function stageContext<I>(
  instance: I,
  runtime: SandboxRuntime,
  config: Record<string, unknown> = {},
  signal = new AbortController().signal,
): StageContext<I> & { opened: Sandbox[]; closeAll(): Promise<void> } {
  const opened: Sandbox[] = [];
  const job: JobInfo<I> = { id: 'job-1', instance, samplingParams: {}, groupId: undefined, policyVersion: undefined, seed: 1 };
  return {
    job,
    signal,
    config,
    log: quietLog,
    tokenizer: qwen3Tokenizer(),
    opened,
    sandboxes: {
      async open(spec: SandboxSpec, s?: AbortSignal) {
        const sb = await runtime.open(spec, s);
        opened.push(sb);
        return sb;
      },
    },
    async closeAll() {
      await Promise.all(opened.map((s) => s.close()));
    },
  };
}

/** Validates a raw row with a handler's instance schema (throws with the issues on failure). */
export async function parseInstance<I>(schema: { '~standard': { validate(v: unknown): unknown } }, row: unknown): Promise<I> {
  const r = (await schema['~standard'].validate(row)) as { value?: I; issues?: Array<{ message: string; path?: unknown[] }> };
  if (r.issues) throw new Error(JSON.stringify(r.issues));
  return r.value as I;
}

export { normaliseRow };
