import { RaasError } from '../../protocol/errors.js';
import type { AgentHandler } from './types.js';
import { chatHandler } from './chat.js';
import { mathHandler } from './math/index.js';
import { codeHandler } from './code/index.js';
import { sweHandler } from './swe/index.js';

/** ProRL Agent Server's data_source names, mapped onto ours. */
const PRORL_NAMES: Record<string, string> = { deepscaler: 'math', deepcoder: 'code' };

/** The built-in handlers. The handlers issue adds math / code / swe on this one line. */
export function builtinHandlers(): AgentHandler<any>[] {
  return [chatHandler, mathHandler, codeHandler, sweHandler];
}

/** Handlers by name and alias; `data_source` (or `task`) picks one. */
export class HandlerRegistry {
  private readonly byName = new Map<string, AgentHandler<any>>();

  constructor(handlers: Iterable<AgentHandler<any>> = builtinHandlers()) {
    for (const h of handlers) this.register(h, { replace: true });
  }

  /** Adds a handler under its name and aliases; a name already taken throws unless `replace`. */
  register(handler: AgentHandler<any>, opts: { replace?: boolean } = {}): void {
    assertHandler(handler, handler?.name ?? '(unnamed)');
    const names = [handler.name, ...(handler.aliases ?? [])];
    if (!opts.replace) {
      const taken = names.filter((n) => this.byName.has(n));
      if (taken.length) throw new RaasError('config_invalid', `handler name ${taken.map((n) => JSON.stringify(n)).join(', ')} is already registered: rename the handler or drop the duplicate module`);
    }
    for (const n of names) this.byName.set(n, handler);
  }

  /** The handler for a data_source, following aliases and ProRL's names. */
  resolve(dataSource: string): AgentHandler<any> | undefined {
    return this.byName.get(dataSource) ?? this.byName.get(PRORL_NAMES[dataSource] ?? '');
  }

  /** Every registered handler name (aliases excluded). */
  names(): string[] {
    return [...new Set([...this.byName.values()].map((h) => h.name))].sort();
  }
}

/** Throws config_invalid unless `h` looks like an AgentHandler. */
export function assertHandler(h: unknown, where: string): asserts h is AgentHandler<any> {
  const x = h as Partial<AgentHandler<any>> | undefined;
  const missing: string[] = [];
  if (!x || typeof x !== 'object') throw new RaasError('config_invalid', `${where}: a handler must be an object with name, instance, init, run and eval`);
  if (typeof x.name !== 'string' || !x.name) missing.push('name (string)');
  if (!x.instance || typeof (x.instance as { '~standard'?: unknown })['~standard'] !== 'object') missing.push('instance (a Standard Schema, e.g. a zod 4 schema)');
  for (const k of ['init', 'run', 'eval'] as const) if (typeof x[k] !== 'function') missing.push(`${k}()`);
  if (missing.length) throw new RaasError('config_invalid', `${where}: handler is missing ${missing.join(', ')}`);
}
