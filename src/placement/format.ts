import type { PlacementPlan } from './plan.js';

const WHY = { 1: 'same node', 2: 'round-robin', 3: 'shared, no LLM server left' } as const;

/** The plan as `raas place` prints it: one block per rollout server, then the warnings. */
export function formatPlan(plan: PlacementPlan): string {
  const n = plan.assignments.reduce((s, a) => s + a.llm_servers.filter((l) => l.phase !== 3).length, 0);
  const lines = [`placement: ${n} LLM server(s) onto ${plan.assignments.length} rollout server(s)`];
  for (const a of plan.assignments) {
    lines.push(`  ${a.rollout_server}  [${a.ips.join(', ') || 'unresolved'}]`);
    if (a.llm_servers.length === 0) lines.push('    (none)');
    for (const l of a.llm_servers) lines.push(`    <- ${l.address} (${l.api})  phase ${l.phase}: ${WHY[l.phase]}`);
  }
  for (const w of plan.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n');
}
