// bench:pools's swe-like task, loaded by `raas serve --handler` (the server runs in its own process,
// so the CPU it and its test processes use is what its autosizer sees). The chat handler's two model
// turns; INIT starts a process (as a sandbox start); EVAL waits on a test process (`sleep`: a suite
// waiting on its services).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chatHandler } from '../dist/src/server/index.js';

const run = promisify(execFile);
const EVAL_S = Number(process.env.RAAS_BENCH_SWE_EVAL_S ?? 1.5);

export default {
  ...chatHandler,
  name: 'swe-like',
  async init(ctx) {
    await run('/bin/true', [], { signal: ctx.signal });
    return {};
  },
  async eval(ctx) {
    await run('sleep', [String(EVAL_S)], { signal: ctx.signal });
    return chatHandler.eval(ctx);
  },
};
