import { createHash } from 'node:crypto';
import { RaasError, fieldPath } from '../../protocol/errors.js';
import { DEFAULT_DATA_SOURCE, PROCESS_KEYS, ProcessRequest } from '../../protocol/process.js';
import { parseOrThrow } from '../../protocol/validation.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import type { AdmissionEnv, AgentHandler } from '../handlers/types.js';
import { SandboxConfig } from '../../protocol/config-sandbox.js';

/** A /process body after validation: the request, its handler, and the instance as the handler's schema returned it. */
export interface Admitted {
  request: ProcessRequest;
  handler: AgentHandler<unknown>;
  instance: unknown;
}

/**
 * What admission checks instances against, from the server's `sandbox:` section (its defaults when
 * the section does not parse: the server refuses such a config at start anyway).
 */
export function admissionEnv(sandbox: Record<string, unknown> = {}): AdmissionEnv {
  const parsed = SandboxConfig.safeParse(sandbox);
  const cfg = parsed.success ? parsed.data : SandboxConfig.parse({});
  return { dataDirs: cfg.data_dirs, maxFileBytes: cfg.disk_mb * 1024 * 1024 };
}

/**
 * Validates a /process body: the envelope with zod, then the instance with the handler's Standard
 * Schema, then the handler's checkInstance against the server (`env`; default config when omitted).
 * Unknown top-level keys are dropped, as ProRL's request model drops them, and reported to
 * `ignored`; a missing `data_source` means `swebench`, as in ProRL.
 */
export async function admit(
  body: unknown,
  registry: HandlerRegistry,
  env: AdmissionEnv = admissionEnv(),
  ignored?: (key: string) => void,
): Promise<Admitted> {
  const request = parseOrThrow(ProcessRequest, body);
  if (ignored) for (const k of Object.keys(body as object)) if (!PROCESS_KEYS.has(k)) ignored(k);
  const given = request.instance.data_source ?? request.instance.task;
  const name = given ?? DEFAULT_DATA_SOURCE;
  const handler = registry.resolve(name);
  if (!handler) {
    const names = registry
      .names()
      .map((n) => JSON.stringify(n))
      .join(', ');
    const why =
      given === undefined
        ? `instance.data_source is missing, which means ${JSON.stringify(name)} (as in ProRL), and no handler has that name`
        : `instance.data_source ${JSON.stringify(name)} names no handler`;
    throw new RaasError('unknown_data_source', `${why}: use one of ${names}`);
  }
  const std = handler.instance['~standard'];
  let out: Awaited<ReturnType<typeof std.validate>>;
  try {
    const r = std.validate(request.instance);
    out = r instanceof Promise ? await r : r;
  } catch (err) {
    // A schema that throws instead of reporting issues is still the instance's fault, not a 500.
    throw new RaasError('invalid_instance', `${handler.name} instance: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  if (out.issues) {
    const msg = out.issues
      .slice(0, 5)
      .map((i) => `${fieldPath(['instance', ...(i.path ?? []).map((p) => (typeof p === 'object' ? p.key : p))])}: ${i.message}`)
      .join('; ');
    throw new RaasError('invalid_instance', `${handler.name} instance: ${msg}`);
  }
  if (!handler.checkInstance) return { request, handler, instance: out.value };
  let checked: unknown;
  try {
    checked = await handler.checkInstance(out.value, env);
  } catch (err) {
    if (err instanceof RaasError) throw err;
    throw new RaasError('invalid_instance', `${handler.name} instance: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  return { request, handler, instance: checked ?? out.value };
}

/** A short fingerprint of an instance, to tell a resubmission from a different job under the same id. */
export function instanceHash(instance: unknown): string {
  return createHash('sha1').update(JSON.stringify(instance)).digest('base64url').slice(0, 16);
}
