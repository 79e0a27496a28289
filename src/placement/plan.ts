import type { LlmApi } from '../protocol/llm.js';
import { RaasError } from '../protocol/errors.js';
import { hostOf, resolveHosts, systemLookup, type Lookup } from './resolve.js';

/** A rollout server to place onto. */
export interface RolloutServerSpec {
  url: string;
  token?: string;
}

/** An LLM inference server to place. */
export interface LlmServerSpec {
  address: string;
  api?: LlmApi;
}

/** How one LLM server got its rollout server: 1 same node, 2 round-robin, 3 shared so no rollout server is left empty. */
type PlacementPhase = 1 | 2 | 3;

/** One rollout server's share of the plan. */
interface PlacementAssignment {
  rollout_server: string;
  /** Its addresses after DNS resolution (its "node"). */
  ips: string[];
  llm_servers: Array<{ address: string; api: LlmApi; phase: PlacementPhase; ips: string[] }>;
}

/** The whole plan, in the order of the rollout servers given. */
export interface PlacementPlan {
  assignments: PlacementAssignment[];
  warnings: string[];
}

/** Options of {@link planPlacement}. */
export interface PlanOptions {
  lookup?: Lookup;
  /**
   * When rollout servers outnumber LLM servers, phases 1–2 leave some without a backend, and every
   * job sent there would get 503 no_llm_backends. With `fill_empty` (default true) each such server
   * also gets the LLM server shared by the fewest rollout servers (same node first): phase 3.
   */
  fill_empty?: boolean;
}

/**
 * Two-phase node-affine placement (docs/client.md, "Placement"). Phase 1: each LLM server goes to the
 * least-loaded rollout server on its node (same IP after DNS resolution). Phase 2: the rest go
 * round-robin to the least-loaded rollout servers. Load is the number of LLM servers assigned.
 */
export async function planPlacement(rollout: RolloutServerSpec[], llm: LlmServerSpec[], opts: PlanOptions = {}): Promise<PlacementPlan> {
  if (rollout.length === 0) throw new RaasError('config_invalid', 'rollout_servers: give at least one rollout server {url}');
  dupes(
    rollout.map((r) => r.url.replace(/\/+$/, '')),
    'rollout_servers',
    'url',
  );
  dupes(
    llm.map((l) => l.address),
    'llm_servers',
    'address',
  );
  const rHosts = rollout.map((r, i) => hostAt(r.url, `rollout_servers[${i}].url`));
  const lHosts = llm.map((l, i) => hostAt(l.address, `llm_servers[${i}].address`));
  const { ips, failures } = await resolveHosts([...rHosts, ...lHosts], opts.lookup ?? systemLookup);
  const warnings = failures.map((f) => `could not resolve ${f}; no node match for it`);

  const assignments: PlacementAssignment[] = rollout.map((r, i) => ({
    rollout_server: r.url,
    ips: ips.get(rHosts[i]) ?? [],
    llm_servers: [],
  }));
  const load = (i: number): number => assignments[i].llm_servers.length;
  const assign = (i: number, l: number, phase: PlacementPhase): void => {
    assignments[i].llm_servers.push({ address: llm[l].address, api: apiOf(llm[l]), phase, ips: ips.get(lHosts[l]) ?? [] });
  };

  // Phase 1: same node. Among the co-located rollout servers, the least loaded (first on ties).
  const rest: number[] = [];
  llm.forEach((_, l) => {
    const mine = new Set(ips.get(lHosts[l]));
    const local = assignments.map((a, i) => i).filter((i) => assignments[i].ips.some((ip) => mine.has(ip)));
    if (local.length === 0) return void rest.push(l);
    assign(
      local.reduce((b, i) => (load(i) < load(b) ? i : b)),
      l,
      1,
    );
  });

  // Phase 2: round-robin over the least-loaded rollout servers; the cursor breaks ties so equal
  // servers take turns instead of the first one taking every tie.
  let cursor = 0;
  for (const l of rest) {
    let best = -1;
    for (let k = 0; k < rollout.length; k++) {
      const i = (cursor + k) % rollout.length;
      if (best < 0 || load(i) < load(best)) best = i;
    }
    assign(best, l, 2);
    cursor = (best + 1) % rollout.length;
  }

  const empty = assignments.filter((a) => a.llm_servers.length === 0);
  if (empty.length > 0 && llm.length > 0 && opts.fill_empty !== false) {
    // Phase 3: the LLM server shared by the fewest rollout servers, a co-located one on ties.
    const sharedBy = llm.map(() => 1);
    for (const a of empty) {
      const mine = new Set(a.ips);
      const score = (l: number): number => sharedBy[l] * 2 - ((ips.get(lHosts[l]) ?? []).some((ip) => mine.has(ip)) ? 1 : 0);
      const best = llm.map((_, l) => l).reduce((b, l) => (score(l) < score(b) ? l : b));
      sharedBy[best]++;
      assign(assignments.indexOf(a), best, 3);
    }
  } else if (empty.length > 0) {
    for (const a of empty) warnings.push(`${a.rollout_server} gets no LLM server; its jobs will be refused with 503 no_llm_backends`);
  }
  return { assignments, warnings };
}

function dupes(values: string[], list: string, key: string): void {
  const seen = new Set<string>();
  values.forEach((v, i) => {
    if (seen.has(v)) throw new RaasError('config_invalid', `${list}[${i}].${key}: ${v} is listed twice`);
    seen.add(v);
  });
}

function hostAt(address: string, field: string): string {
  try {
    return hostOf(address);
  } catch (err) {
    throw new RaasError('config_invalid', `${field}: ${(err as Error).message}`);
  }
}

/** The api of an LLM server: given, else vLLM (ProRL's `.../v1` addresses are vLLM, and so is the default). */
function apiOf(l: LlmServerSpec): LlmApi {
  return l.api ?? 'vllm';
}
