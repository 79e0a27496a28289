/** Two-phase node-affine placement of LLM servers onto rollout servers (docs/client.md, "Placement"). */
export { planPlacement } from './plan.js';
export type { PlacementPlan, PlanOptions, RolloutServerSpec, LlmServerSpec } from './plan.js';
export { applyPlacement } from './apply.js';
export type { ApplyOptions, ApplyReport } from './apply.js';
export { formatPlan } from './format.js';
export { PlaceConfig, parsePlaceConfig, loadPlaceConfig } from './config.js';
export type { Lookup } from './resolve.js';

import type { ApplyOptions, ApplyReport } from './apply.js';
import { applyPlacement } from './apply.js';
import type { LlmServerSpec, PlacementPlan, PlanOptions, RolloutServerSpec } from './plan.js';
import { planPlacement } from './plan.js';

/** Plans and applies in one call (what the coordinator does at start and on each weight update). */
export async function place(
  rollout: RolloutServerSpec[],
  llm: LlmServerSpec[],
  opts: PlanOptions & Omit<ApplyOptions, 'servers'> = {},
): Promise<{ plan: PlacementPlan; applied: ApplyReport }> {
  const plan = await planPlacement(rollout, llm, opts);
  const applied = await applyPlacement(plan, { ...opts, servers: rollout });
  return { plan, applied };
}
