#!/usr/bin/env node
import { Command } from 'commander';
import { registerServe } from './server/cli.js';
import { registerSimLlm } from './sim/cli.js';
import { registerTrain } from './dapo/cli.js';
import { registerShow } from './dapo/show-cli.js';
import { registerPlace } from './placement/cli.js';
import { registerSidecar } from './sidecar/cli.js';
import { registerAuditDrift } from './tokens/audit-cli.js';
import { registerView } from './ui/view-cli.js';
import { RAAS_VERSION } from './version.js';
import { flagErrorLine } from './util/config-flags.js';
import { followNpmWrapper } from './util/wrapper.js';

const program = new Command('raas')
  .description('rollout-as-a-service for RL of multi-turn LLM agents')
  .version(RAAS_VERSION)
  // Flag errors name the flag and what it takes ("raas: --n: must be a positive integer, got "-2""),
  // with a pointer to --help rather than the whole help text. Subcommands inherit this.
  .configureOutput({ outputError: (text, write) => write(flagErrorLine(text)) })
  .showHelpAfterError('(add --help for the options)');

// Started through npm or npx: stop with the wrapper, which does not pass SIGTERM on (src/util/wrapper.ts).
followNpmWrapper();

registerServe(program);
registerTrain(program);
registerShow(program);
registerPlace(program);
registerSidecar(program);
registerSimLlm(program);
registerAuditDrift(program);
registerView(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`raas: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
