import { RaasError } from '../../protocol/errors.js';
import { isDeepcoderName } from '../../protocol/tasks.js';
import type { AgentHandler } from './types.js';
import { chatHandler } from './chat.js';
import { mathHandler } from './math/index.js';
import { codeHandler } from './code/index.js';
import { sweHandler } from './swe/index.js';
import { harnessHandler } from './harness/index.js';

/**
 * ProRL Agent Server's data_source names, mapped onto ours: its handlers `swebench`, `deepscaler`,
 * `deepcoder`, and the code datasets it maps to deepcoder (openhands/nvidia/__init__.py@40c1d8a:5-10).
 * The built-in handlers carry these as aliases too; this table keeps them working when a handler
 * module replaces a built-in without them.
 */
const PRORL_NAMES: Record<string, string> = {
  swebench: 'swe',
  deepscaler: 'math',
  deepcoder: 'code',
  codecontests: 'code',
  apps: 'code',
  codeforces: 'code',
  taco: 'code',
};

/** The built-in handlers: chat, math, code, swe and harness (modules add more through handler_modules). */
export function builtinHandlers(): AgentHandler<unknown>[] {
  return [chatHandler, mathHandler, codeHandler, sweHandler, harnessHandler as AgentHandler<unknown>];
}

/** Handlers by name and alias; `data_source` (or `task`) picks one. */
export class HandlerRegistry {
  private readonly byName = new Map<string, AgentHandler<unknown>>();

  constructor(handlers: Iterable<AgentHandler<unknown>> = builtinHandlers()) {
    for (const h of handlers) this.register(h, { replace: true });
  }

  /** Adds a handler under its name and aliases; a name already taken throws unless `replace`. */
  register(handler: AgentHandler<unknown>, opts: { replace?: boolean } = {}): void {
    assertHandler(handler, handler?.name ?? '(unnamed)');
    const names = [handler.name, ...(handler.aliases ?? [])];
    if (!opts.replace) {
      const taken = names.filter((n) => this.byName.has(n));
      if (taken.length)
        throw new RaasError(
          'config_invalid',
          `handler name ${taken.map((n) => JSON.stringify(n)).join(', ')} is already registered: rename the handler or drop the duplicate module`,
        );
    }
    for (const n of names) this.byName.set(n, handler);
  }

  /**
   * The handler for a data_source, following aliases and ProRL's names, with ProRL's prefix rule
   * (`deepcoder…` is the code handler, openhands/nvidia/registry.py@40c1d8a:133). Undefined for a
   * name nothing matches: /process answers 400 unknown_data_source (ProRL: 500).
   */
  resolve(dataSource: string): AgentHandler<unknown> | undefined {
    const direct =
      this.byName.get(dataSource) ?? (Object.hasOwn(PRORL_NAMES, dataSource) ? this.byName.get(PRORL_NAMES[dataSource]!) : undefined);
    if (direct || !isDeepcoderName(dataSource)) return direct;
    return this.byName.get('deepcoder') ?? this.byName.get('code');
  }

  /** Every registered handler name (aliases excluded). */
  names(): string[] {
    return [...new Set([...this.byName.values()].map((h) => h.name))].sort();
  }
}

/** Throws config_invalid unless `h` looks like an AgentHandler. */
export function assertHandler(h: unknown, where: string): asserts h is AgentHandler<unknown> {
  const x = h as Partial<AgentHandler<unknown>> | undefined;
  const missing: string[] = [];
  if (!x || typeof x !== 'object')
    throw new RaasError('config_invalid', `${where}: a handler must be an object with name, instance, init, run and eval`);
  if (typeof x.name !== 'string' || !x.name) missing.push('name (string)');
  if (!x.instance || typeof (x.instance as { '~standard'?: unknown })['~standard'] !== 'object')
    missing.push('instance (a Standard Schema, e.g. a zod 4 schema)');
  for (const k of ['init', 'run', 'eval'] as const) if (typeof x[k] !== 'function') missing.push(`${k}()`);
  if (missing.length) throw new RaasError('config_invalid', `${where}: handler is missing ${missing.join(', ')}`);
}
