import path from 'node:path';
import type { TenantConfig } from '../../protocol/config-tenants.js';
import { RaasError } from '../../protocol/errors.js';
import { resolveToken } from '../../util/secret.js';
import type { BackendPool } from '../llm/pool.js';
import { DEFAULT_TENANT, Tenant } from './tenant.js';
import { allowedIdentity } from './backend-identity.js';

/** Makes a tenant's LLM backend pool. */
export type PoolFactory = (tenant: string) => BackendPool;

/**
 * The tenants of one server and their credentials. `single` is a server without `tenants:`: one
 * implicit tenant whose job ids are not namespaced. With `tenants:`, each tenant's token names it;
 * the server's own token is the admin token.
 */
export class TenantSet {
  private readonly byName = new Map<string, Tenant>();
  /** Each tenant's token (for the authenticator); empty in single mode. */
  readonly tokens = new Map<Tenant, string>();

  private constructor(
    readonly list: readonly Tenant[],
    /** True when the server declares `tenants:`. */
    readonly multi: boolean,
  ) {
    for (const t of list) this.byName.set(t.name, t);
  }

  /** The one implicit tenant of a server without `tenants:`. */
  static single(pool: BackendPool): TenantSet {
    const t = new Tenant(
      { name: DEFAULT_TENANT, weight: 1, priority: 0, maxPriority: 100, maxRunning: Infinity, maxQueued: Infinity },
      pool,
      '',
    );
    return new TenantSet([t], false);
  }

  /**
   * The declared tenants, their tokens resolved (inline, `token_file` relative to `baseDir`, or
   * `token_env`). Tokens must be distinct from each other and from the admin token.
   */
  static fromConfig(configs: readonly TenantConfig[], makePool: PoolFactory, baseDir: string, adminToken: string | undefined): TenantSet {
    const tenants = configs.map(
      (c) =>
        new Tenant(
          {
            name: c.name,
            weight: c.weight,
            priority: c.priority,
            maxPriority: Math.max(c.priority, c.max_priority ?? c.priority),
            maxRunning: c.max_running ?? Infinity,
            maxQueued: c.max_queued ?? Infinity,
            ...(c.allowed_backends ? { allowedBackends: c.allowed_backends.map(allowedIdentity) } : {}),
          },
          makePool(c.name),
          c.name,
        ),
    );
    const set = new TenantSet(tenants, true);
    const owner = new Map<string, string>();
    if (adminToken !== undefined) owner.set(adminToken, 'the admin token (token)');
    configs.forEach((c, i) => {
      const what = `tenants[${i}]`;
      const file = c.token_file === undefined ? undefined : path.resolve(baseDir, c.token_file);
      const token = resolveToken({ token: c.token, token_file: file, token_env: c.token_env }, what);
      if (token === undefined)
        throw new RaasError('config_invalid', `${what}: give one of token, token_file, token_env`, { retryable: false });
      if (token.length < 8) throw new RaasError('config_invalid', `${what}.token: must be at least 8 characters`, { retryable: false });
      const clash = owner.get(token);
      if (clash)
        throw new RaasError('config_invalid', `${what}: its token is also ${clash}; every tenant needs its own`, { retryable: false });
      owner.set(token, `tenant "${c.name}"'s`);
      set.tokens.set(tenants[i]!, token);
    });
    return set;
  }

  get(name: string): Tenant | undefined {
    return this.byName.get(name);
  }

  /** The implicit tenant (single mode), else undefined. */
  get sole(): Tenant | undefined {
    return this.multi ? undefined : this.list[0];
  }

  /** A tenant by name, or a 400 naming the known ones. */
  require(name: string, field = 'tenant'): Tenant {
    const t = this.byName.get(name);
    if (!t)
      throw new RaasError(
        'bad_request',
        `${field}: no tenant ${JSON.stringify(name)}; this server's tenants are ${this.list.map((x) => JSON.stringify(x.name)).join(', ')}`,
      );
    return t;
  }

  /** Stops every pool's probes. */
  close(): void {
    for (const t of this.list) t.pool.close();
  }
}
