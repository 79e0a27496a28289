import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { RaasError } from '../../protocol/errors.js';
import type { AgentHandler } from './types.js';
import { assertHandler } from './registry.js';

/**
 * Loads handler modules by path (relative to `baseDir`). Each module's default export is an
 * AgentHandler or an array of them.
 */
export async function loadHandlerModules(paths: readonly string[], baseDir = process.cwd()): Promise<AgentHandler<unknown>[]> {
  const out: AgentHandler<unknown>[] = [];
  for (const p of paths) {
    const file = path.resolve(baseDir, p);
    let mod: { default?: unknown };
    try {
      mod = await import(pathToFileURL(file).href);
    } catch (err) {
      throw new RaasError('config_invalid', `handler_modules: cannot load ${file}: ${err instanceof Error ? err.message : String(err)}`, {
        cause: err,
      });
    }
    const exported = mod.default;
    if (exported === undefined)
      throw new RaasError('config_invalid', `handler_modules: ${file} has no default export: export a handler or an array of handlers`);
    const list = Array.isArray(exported) ? exported : [exported];
    list.forEach((h, i) => assertHandler(h, `handler_modules: ${file}${Array.isArray(exported) ? `[${i}]` : ''}`));
    out.push(...(list as AgentHandler<unknown>[]));
  }
  return out;
}
