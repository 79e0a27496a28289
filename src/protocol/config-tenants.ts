import { z } from 'zod';
import { BackendAddress, LlmApi } from './llm.js';

/** A backend registered at boot, as POST /add_llm_server would. */
export const BackendConfig = z.strictObject({
  address: BackendAddress,
  api: LlmApi.optional(),
  weight_version: z.string().max(256).optional(),
});

/** A tenant's name: what metrics, logs and the journal carry. */
const TenantName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'letters, digits, ".", "_" or "-" (at most 64, starting with a letter or digit)');

/** A job's priority class: higher classes are served first at every stage. */
const PriorityClass = z.number().int().min(0).max(100);

/**
 * One tenant of a shared rollout server (`tenants:`): its bearer token (inline, from a 0600 file or
 * from an environment variable), its share of every stage, its priority class and its quotas.
 */
export const TenantConfig = z.strictObject({
  name: TenantName,
  token: z.string().min(8, 'token must be at least 8 characters').optional(),
  /** A file holding the token (relative to the config file's folder), readable by its owner only. */
  token_file: z.string().min(1).optional(),
  /** The name of an environment variable holding the token. */
  token_env: z.string().min(1).optional(),
  /** Its share of each stage relative to the other tenants waiting in the same priority class. */
  weight: z.number().positive().max(1_000_000).default(1),
  /** The class of its jobs (higher first); a /process `priority` may choose another class up to `max_priority`. */
  priority: PriorityClass.default(0),
  /** The highest class its jobs may ask for (default: `priority`). */
  max_priority: PriorityClass.optional(),
  /** At most this many of its jobs inside stages at once (null: no cap). */
  max_running: z.number().int().positive().nullable().default(null),
  /** At most this many of its jobs waiting for a stage; past it /process answers 503 tenant_quota (null: no cap). */
  max_queued: z.number().int().positive().nullable().default(null),
  /** LLM backends of this tenant registered at start. */
  backends: z.array(BackendConfig).default([]),
  /**
   * The only addresses this tenant may register with POST /add_llm_server (`http://host:port`, or
   * `http://host:*` for any port of a host); unset: any address no other tenant holds. An address on
   * another tenant's list is refused to every tenant but that one, so nobody can take it first.
   */
  allowed_backends: z.array(z.string().min(1).max(2048)).max(10_000).optional(),
});
export type TenantConfig = z.infer<typeof TenantConfig>;

/** The `tenants:` section: names are unique. */
export const TenantsConfig = z
  .array(TenantConfig)
  .min(1, 'tenants: give at least one tenant, or leave the section out for a single-tenant server')
  .superRefine((ts, ctx) => {
    const seen = new Set<string>();
    ts.forEach((t, i) => {
      if (seen.has(t.name)) ctx.addIssue({ code: 'custom', message: `tenant name "${t.name}" is used twice`, path: [i, 'name'] });
      seen.add(t.name);
      const given = [t.token, t.token_file, t.token_env].filter((x) => x !== undefined).length;
      if (given !== 1) ctx.addIssue({ code: 'custom', message: 'give exactly one of token, token_file, token_env', path: [i] });
    });
  });
