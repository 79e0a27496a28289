import { PrefetchRequest, type PrefetchResponse } from '../../protocol/prefetch.js';
import { parseOrThrow } from '../../protocol/validation.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import type { AdmissionEnv } from '../handlers/types.js';
import { admit } from './intake.js';
import type { LazySandboxRuntime } from './sandboxes.js';

/**
 * POST /prefetch: each instance is validated as /process would validate it, its handler names the
 * images its sandboxes will be rooted in (AgentHandler.prefetch), and each image starts unpacking
 * in the background (the image cache shares one conversion with a job that asks meanwhile). One
 * instance that cannot be admitted is skipped, never an error of the whole hint.
 */
export async function prefetchImages(
  body: unknown,
  registry: HandlerRegistry,
  admission: AdmissionEnv,
  handlers: Record<string, Record<string, unknown> | undefined>,
  sandboxes: LazySandboxRuntime,
): Promise<PrefetchResponse> {
  const { instances } = parseOrThrow(PrefetchRequest, body ?? {});
  const refs = new Set<string>();
  let skipped = 0;
  for (const instance of instances) {
    let named: string[] = [];
    try {
      const a = await admit({ instance }, registry, admission);
      named = a.handler.prefetch?.(a.instance, handlers[a.handler.name] ?? {}) ?? [];
    } catch {
      /* an instance that would not be admitted prepares nothing */
    }
    if (named.length === 0) skipped++;
    for (const r of named) refs.add(r);
  }
  for (const r of refs) sandboxes.prefetch(r);
  return { status: 'ok', images: refs.size, skipped };
}
