import { z } from 'zod';
import { Result } from '../protocol/process.js';
import { DatasetCursor } from './dataset.js';
import { HistoryState } from './history.js';
import { SelectorState } from './selection.js';

/** A group as a checkpoint keeps it: enough to rebuild its requests and re-attach to its jobs by id. */
const CheckpointGroup = z.object({
  index: z.number().int().nonnegative(),
  state: z.enum(['running', 'buffered']),
  prompt: z.record(z.string(), z.unknown()),
  submitted_version: z.number().int().nonnegative(),
  submitted_step: z.number().int().nonnegative(),
  /** Server that held the group, so a resume re-attaches there. */
  server: z.string().optional(),
  /** Index k holds rollout k's result, or null while it runs. */
  results: z.array(Result.nullable()),
  /** In-flight job ids (for operators; the ids are also derivable from name and index). */
  in_flight: z.array(z.string()),
  /** The probability selection submitted the prompt with, when below 1. */
  select_keep: z.number().optional(),
});

/** `Coordinator.checkpoint()`: JSON state to resume a run after a trainer restart. */
export const CoordinatorState = z.object({
  format: z.literal('raas.coordinator/1'),
  name: z.string(),
  policy_version: z.number().int().nonnegative(),
  step: z.number().int().nonnegative(),
  next_group_index: z.number().int().nonnegative(),
  cursor: DatasetCursor,
  groups: z.array(CheckpointGroup),
  /** Per prompt: its groups' rewards, submissions and skips (absent in checkpoints of older versions). */
  prompts: HistoryState.optional(),
  /** Selection's adaptive keep probabilities. */
  selector: SelectorState.optional(),
  saved_at: z.string(),
});
export type CoordinatorState = z.infer<typeof CoordinatorState>;

/**
 * `runs/<name>/checkpoint.json`, written by `raas train` (atomically) after every step and when it
 * is interrupted: what `raas train --resume <run dir>` continues from.
 */
export const TrainCheckpoint = z.object({
  format: z.literal('raas.train/1'),
  /** Steps whose batch was written, trained on and followed by the weight update. */
  steps_done: z.number().int().nonnegative(),
  steps_asked: z.number().int().positive(),
  /** Size of batches.jsonl after step steps_done - 1: a resume cuts off what a later, unfinished step appended. */
  batches_jsonl_bytes: z.number().int().nonnegative(),
  /** Step files of the finished steps, relative to the run directory. */
  batch_files: z.array(z.string()),
  /** Wall time of the earlier attempts of this run (summary.json's wall_s adds them up). */
  wall_s: z.number().nonnegative(),
  /** How many times the run was resumed before this checkpoint. */
  resumes: z.number().int().nonnegative(),
  /** Run totals of the earlier attempts (summary.json's totals add them up). */
  totals: z.record(z.string(), z.number()),
  coordinator: CoordinatorState,
  saved_at: z.string(),
});
export type TrainCheckpoint = z.infer<typeof TrainCheckpoint>;
