import { RaasError, fieldPath } from '../../../protocol/errors.js';
import { HarnessHandlerConfig, type HarnessSpec } from '../../../protocol/harness.js';

const parsed = new WeakMap<object, HarnessHandlerConfig>();

/** `handlers.harness`, checked once per config object; a bad one is `config_invalid` naming the key. */
export function harnessConfig(raw: Record<string, unknown>): HarnessHandlerConfig {
  let cfg = parsed.get(raw);
  if (!cfg) {
    const r = HarnessHandlerConfig.safeParse(raw);
    if (!r.success) {
      const issue = r.error.issues[0]!;
      throw new RaasError('config_invalid', `handlers.harness.${fieldPath(issue.path)}: ${issue.message}`, { retryable: false });
    }
    cfg = r.data;
    parsed.set(raw, cfg);
  }
  return cfg;
}

/** The harness an instance names (or the configured default), with the fix when there is none. */
export function pickHarness(cfg: HarnessHandlerConfig, name: string | undefined): { name: string; spec: HarnessSpec } {
  const names = Object.keys(cfg.harnesses);
  const chosen = name ?? cfg.default ?? (names.length === 1 ? names[0] : undefined);
  if (chosen === undefined)
    throw new RaasError(
      'invalid_instance',
      names.length === 0
        ? 'no harness is configured: add handlers.harness.harnesses.<name> = {command, ...} to the server config'
        : `instance.harness is required: choose one of ${names.join(', ')} (or set handlers.harness.default)`,
      { retryable: false },
    );
  const spec = cfg.harnesses[chosen];
  if (!spec)
    throw new RaasError(
      'invalid_instance',
      `instance.harness: no harness ${JSON.stringify(chosen)} is configured (configured: ${names.join(', ') || 'none'})`,
      {
        retryable: false,
      },
    );
  return { name: chosen, spec };
}
