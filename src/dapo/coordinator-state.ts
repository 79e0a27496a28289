import type { TrainConfig } from '../protocol/config-train.js';
import type { CoordinatorState } from './checkpoint.js';
import type { DapoCore } from './core.js';
import type { Prompt } from './dataset.js';
import { groupId, groupRequests, type GroupRecord } from './group.js';

/**
 * The coordinator's JSON state (`Coordinator.checkpoint()`): dataset cursor, buffered groups with
 * their results, running groups with their job ids and server (`where` says where the fleet has
 * them now), the prompt history and the selector's state.
 */
export function coordinatorState(core: DapoCore, cfg: TrainConfig, where: (g: GroupRecord) => string | undefined): CoordinatorState {
  const groups = [...core.groups.values()]
    .filter((g) => g.state === 'running' || g.state === 'buffered')
    .map((g) => {
      const server = where(g);
      return {
        index: g.index,
        state: g.state as 'running' | 'buffered',
        prompt: g.prompt,
        submitted_version: g.submittedVersion,
        submitted_step: g.submittedStep,
        ...(server ? { server } : {}),
        results: g.results.map((r) => r ?? null),
        in_flight: g.requests.filter((_, k) => g.results[k] === undefined).map((q) => q.job_id!),
        ...(g.selectKeep !== undefined ? { select_keep: g.selectKeep } : {}),
      };
    });
  return {
    format: 'raas.coordinator/1',
    name: cfg.name,
    policy_version: core.version,
    step: core.step,
    next_group_index: core.nextIndex,
    // Copies: the state may be serialised later (a sidecar answer) while results keep arriving.
    cursor: { ...core.dataset.cursor },
    groups,
    prompts: core.history.all().map((r) => ({ ...r, groups: [...r.groups] })),
    selector: core.selector.state(),
    saved_at: new Date().toISOString(),
  };
}

/** Puts a checkpoint's versions, counters and groups into a fresh core (a group's size is its results' length). */
export function restoreCore(core: DapoCore, st: CoordinatorState, cfg: TrainConfig): void {
  core.version = st.policy_version;
  core.step = st.step;
  core.nextIndex = st.next_group_index;
  for (const cg of st.groups) {
    const prompt = cg.prompt as Prompt;
    const g: GroupRecord = {
      index: cg.index,
      id: groupId(cfg.name, cg.index),
      prompt,
      requests: groupRequests(cfg, prompt, cg.index, cg.submitted_version, cg.results.length),
      submittedVersion: cg.submitted_version,
      submittedStep: cg.submitted_step,
      state: cg.state,
      results: cg.results.map((r) => r ?? undefined),
      ended: cg.results.filter((r) => r !== null).length,
      tokens: 0,
      server: cg.server,
      ...(cg.select_keep !== undefined ? { selectKeep: cg.select_keep } : {}),
    };
    core.restoreGroup(g);
  }
}
