import { RaasError } from '../../protocol/errors.js';
import type { Principal } from '../auth.js';
import type { Tenant } from './tenant.js';
import type { TenantSet } from './tenants.js';

/**
 * What a request may reach, from its principal: the routes ask here, so the rules live in one
 * place. A single-tenant server's principal is the admin and the implicit tenant at once.
 */
export class Access {
  constructor(
    private readonly tenants: TenantSet,
    readonly principal: Principal,
  ) {}

  /** Server-wide routes: the admin only. */
  admin(route: string): void {
    if (this.principal.admin) return;
    throw new RaasError('forbidden', `${route} is a server-wide route: send the admin token (the server's token), not a tenant's`);
  }

  /** The tenant whose jobs a request creates: its own; the admin of a multi-tenant server has none. */
  tenant(route: string): Tenant {
    const t = this.principal.tenant;
    if (t) return t;
    throw new RaasError('forbidden', `${route} runs a tenant's jobs: send a tenant's token (the admin token names no tenant)`);
  }

  /**
   * The tenants a lookup reaches: a tenant's own; the admin's every one, or the one it names.
   * Undefined means "every tenant".
   */
  scope(named?: string): Tenant | undefined {
    const t = this.principal.tenant;
    if (t && !this.principal.admin) return t;
    if (named !== undefined && this.tenants.multi) return this.tenants.require(named);
    return t;
  }

  /**
   * The tenant whose LLM pool a backend route changes: a tenant's own (naming another is
   * refused); the admin of a multi-tenant server must name one.
   */
  pool(route: string, named?: string): Tenant {
    const t = this.principal.tenant;
    if (t && (!this.tenants.multi || named === undefined || named === t.name)) return t;
    if (t && !this.principal.admin)
      throw new RaasError('forbidden', `${route}: a tenant changes only its own backends (tenant "${t.name}")`);
    if (named === undefined)
      throw new RaasError('bad_request', `${route}: tenant: this server has tenants; name the tenant whose backends to change`);
    return this.tenants.require(named);
  }
}
