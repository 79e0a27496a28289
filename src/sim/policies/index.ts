import type { PolicyOptions, SimPolicy } from '../policy.js';

/**
 * Loads the scripted policies (math, code, swe) for the given dataset files (JSONL or Parquet rows).
 * Placeholder until the handlers land: no dataset is recognised, so every prompt gets filler text.
 */
export async function loadPolicies(_datasetPaths: string[], _opts: PolicyOptions): Promise<SimPolicy[]> {
  return [];
}
