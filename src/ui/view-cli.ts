import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { RaasError } from '../protocol/errors.js';
import { resolveTokenizerSpec } from '../tokens/resolve.js';
import type { Tokenizer } from '../tokens/tokenizer.js';
import { portArg } from '../util/config-flags.js';
import { isLoopbackHost } from '../util/loopback.js';
import { examples } from '../util/help.js';
import { startRunViewer } from './view-server.js';

interface ViewFlags {
  port: number;
  host: string;
  tokenizer?: string;
  insecure?: boolean;
}

/** The tokenizer a run's ids were made with: the flag, else the embedded server's setting in its config.json, else Qwen3. */
function runTokenizer(dir: string, flag: string | undefined): string {
  if (flag) return flag;
  try {
    const cfg = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as { embedded?: { server?: { tokenizer?: unknown } } };
    const t = cfg.embedded?.server?.tokenizer;
    if (typeof t === 'string' && t) return t;
  } catch {
    // no config.json (a sidecar's run): the default
  }
  return 'qwen3';
}

/** Registers `raas view <run dir>`: the run view in the browser. */
export function registerView(program: Command): void {
  program
    .command('view')
    .description('open a run directory of raas train in the browser: steps, charts, groups, any rollout (follows a run in progress)')
    .addHelpText(
      'after',
      examples([
        ['raas view runs/demo', 'steps, charts, groups and any rollout at http://127.0.0.1:8007/ui; follows a run in progress'],
        ['raas view runs/demo --tokenizer qwen3', "the tokenizer that decodes the run's ids (default: the run's own)"],
      ]),
    )
    .argument('<run-dir>', 'the run directory, e.g. runs/demo')
    .option('--port <n>', 'port (0 picks a free one)', portArg('--port'), 8007)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--tokenizer <name>', "tokenizer that decodes the run's ids (default: the run's embedded server setting, else qwen3)")
    .option('--insecure', 'allow a non-loopback --host (the view has no authentication: anyone who reaches it reads the run)')
    .action(async (dir: string, flags: ViewFlags) => {
      if (!isLoopbackHost(flags.host) && !flags.insecure)
        throw new RaasError(
          'config_invalid',
          `--host ${flags.host} is not a loopback address and raas view has no authentication: keep 127.0.0.1 and forward the port (ssh -L 8007:127.0.0.1:8007 <node>), or pass --insecure`,
        );
      const spec = runTokenizer(dir, flags.tokenizer);
      let tok: Tokenizer | undefined;
      const viewer = await startRunViewer({
        dir,
        host: flags.host,
        port: flags.port,
        tokenizer: () => (tok ??= resolveTokenizerSpec(spec)),
      });
      process.stdout.write(`raas view: ${viewer.url}/ui (${path.resolve(dir)}; follows the run's files; Ctrl-C stops)\n`);
      const stop = (): void => {
        void viewer.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
