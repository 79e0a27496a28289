import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { RaasError } from '../../protocol/errors.js';
import type { SimPolicy } from '../policy.js';
import { isTaskScript, type TaskScript } from './custom.js';

/** What `sim.policies` modules provide: scripts over dataset rows, and whole policies. */
export interface PolicyModules {
  scripts: Array<{ script: TaskScript; from: string }>;
  policies: SimPolicy[];
}

const isPolicy = (v: unknown): v is SimPolicy =>
  !!v && typeof v === 'object' && typeof (v as SimPolicy).respond === 'function' && typeof (v as SimPolicy).name === 'string';

/**
 * Imports each module (an absolute path, or relative to the working directory; config files
 * resolve theirs against their folder). A module's default export is a TaskScript (how the
 * simulated model plays the rows of a data_source), a SimPolicy (`{name, respond(ctx)}`), or an
 * array of them.
 */
export async function loadPolicyModules(files: readonly string[]): Promise<PolicyModules> {
  const out: PolicyModules = { scripts: [], policies: [] };
  for (const f of files) {
    const file = path.resolve(f);
    let mod: { default?: unknown };
    try {
      mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
    } catch (err) {
      throw new RaasError('config_invalid', `sim policies: cannot load ${file}: ${(err as Error).message}`, {
        cause: err,
        retryable: false,
      });
    }
    const list = Array.isArray(mod.default) ? mod.default : [mod.default];
    list.forEach((v, i) => {
      const from = `${file}${Array.isArray(mod.default) ? `[${i}]` : ''}`;
      if (isTaskScript(v)) out.scripts.push({ script: v, from });
      else if (isPolicy(v)) out.policies.push(v);
      else
        throw new RaasError(
          'config_invalid',
          `sim policies: ${from}: the default export must be a task script {data_source, match(row), right(row), wrong?(row)}, a policy {name, respond(ctx)}, or an array of them`,
          { retryable: false },
        );
    });
  }
  return out;
}
