// The DAPO coordinator's public API (re-exported by src/index.ts).
export { Coordinator } from './coordinator.js';
export type { CoordinatorOptions, CoordinatorStatus } from './coordinator.js';
export { loadTrainConfig } from './config.js';
export { runEval } from './eval.js';
export type { EvalReport } from './eval.js';
export { CoordinatorState } from './checkpoint.js';
export { TrainConfig } from '../protocol/config-train.js';
export type { TrainConfigInput } from '../protocol/config-train.js';
