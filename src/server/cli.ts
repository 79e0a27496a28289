import path from 'node:path';
import { Option, type Command } from 'commander';
import type { ServerConfigInput } from '../protocol/config-server.js';
import { setHelp, collect, intArg, numberArg, portArg } from '../util/config-flags.js';
import { loadServerConfig } from './config.js';
import { startRolloutServer } from './index.js';
import { examples } from '../util/help.js';

interface ServeFlags {
  config?: string;
  host?: string;
  port?: number;
  token?: string;
  tokenFile?: string;
  tokenEnv?: string;
  insecure?: boolean;
  llm?: string[];
  api?: 'vllm' | 'sglang';
  handler?: string[];
  journalDir?: string;
  routing?: 'active' | 'assigned' | 'round_robin';
  workersInit?: number;
  workersRun?: number;
  workersEval?: number;
  timeout?: number;
  logLevel?: string;
  set?: string[];
}

/** CLI flags as a partial config; only flags the user gave override the file. */
function overridesOf(f: ServeFlags): ServerConfigInput {
  const o: Record<string, unknown> = {};
  if (f.host !== undefined) o.host = f.host;
  if (f.port !== undefined) o.port = f.port;
  if (f.token !== undefined) o.token = f.token;
  // Flag paths are relative to the working directory (config-file paths to the file's folder).
  if (f.tokenFile !== undefined) o.token_file = path.resolve(f.tokenFile);
  if (f.tokenEnv !== undefined) o.token_env = f.tokenEnv;
  if (f.insecure) o.insecure = true;
  if (f.journalDir !== undefined) o.journal = { dir: f.journalDir };
  if (f.timeout !== undefined) o.timeout_s = f.timeout;
  if (f.logLevel !== undefined) o.log_level = f.logLevel;
  const workers: Record<string, number> = {};
  if (f.workersInit !== undefined) workers.init = f.workersInit;
  if (f.workersRun !== undefined) workers.run = f.workersRun;
  if (f.workersEval !== undefined) workers.eval = f.workersEval;
  if (Object.keys(workers).length) o.workers = workers;
  const llm: Record<string, unknown> = {};
  if (f.routing !== undefined) llm.routing = f.routing;
  if (f.llm?.length) llm.backends = f.llm.map((address) => ({ address, api: f.api }));
  if (Object.keys(llm).length) o.llm = llm;
  // Flag paths are relative to the working directory (config-file paths to the file's folder).
  if (f.handler?.length) o.handler_modules = f.handler.map((h) => path.resolve(h));
  return o as ServerConfigInput;
}

/** Registers `raas serve`: the rollout server. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the rollout server (HTTP API of docs/api.md)')
    .addHelpText(
      'after',
      examples([
        ['raas serve --config configs/server.yaml', 'every setting in the file (paths relative to it); flags override it'],
        [
          'raas serve --llm http://127.0.0.1:9000 --workers-run 32 --set llm.routing=assigned',
          'on 127.0.0.1:8006 with a vLLM backend and 32 RUN workers',
        ],
        ['raas serve --host 0.0.0.0 --token-env RAAS_TOKEN', 'a cluster node: every route but /health needs the bearer token'],
      ]),
    )
    .option('--config <file>', 'YAML server config (configs/server.yaml); flags override it')
    .option('--host <host>', 'address to bind (default 127.0.0.1; non-loopback needs --token or --insecure)')
    .option('--port <n>', 'port (0 picks a free one; default 8006)', portArg('--port'))
    .option(
      '--token <secret>',
      'require "Authorization: Bearer <secret>" on every route but GET /health (visible in ps: prefer --token-file or --token-env on shared nodes)',
    )
    .option('--token-file <file>', 'read the token from a file readable by its owner only (chmod 600)')
    .option('--token-env <name>', 'read the token from the environment variable <name> (e.g. RAAS_TOKEN)')
    .option('--insecure', 'allow a non-loopback bind without a token')
    .option('--llm <address...>', 'LLM backends to register at start (replaces the config list)')
    .addOption(new Option('--api <api>', 'API of the --llm backends').choices(['vllm', 'sglang']))
    .option('--handler <module...>', 'handler modules to load (replaces handler_modules)')
    .option('--journal-dir <dir>', 'results journal directory (GET /jobs/:id across restarts)')
    .addOption(new Option('--routing <key>', 'backend routing key').choices(['active', 'assigned', 'round_robin']))
    .option('--workers-init <n>', 'INIT workers', intArg('--workers-init', { min: 1 }))
    .option('--workers-run <n>', 'RUN workers', intArg('--workers-run', { min: 1 }))
    .option('--workers-eval <n>', 'EVAL workers', intArg('--workers-eval', { min: 1 }))
    .option('--timeout <s>', 'default counted seconds per job', numberArg('--timeout', { positive: true }))
    .addOption(
      new Option('--log-level <level>', 'server log level').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    )
    .option('--set <key=value>', setHelp('workers.run=32'), collect)
    .action(async (flags: ServeFlags) => {
      const { config, baseDir } = await loadServerConfig(flags.config, overridesOf(flags), flags.set);
      const server = await startRolloutServer(config, { baseDir });
      // The tokenizer loads at the first job that needs it (~1.5 s of CPU), so sandbox-less or
      // tokenizer-less handler sets start at once.
      process.stdout.write(`raas serve listening on ${server.url} (routing ${config.llm.routing}, ${server.pool.size} LLM backend(s))\n`);
      if (config.console.enabled) process.stdout.write(`raas serve: console at ${server.url}/ui (docs/console.md)\n`);
      let stopping = false;
      const stop = (signal: string): void => {
        if (stopping) return;
        stopping = true;
        process.stderr.write(`raas serve: ${signal}: closing intake, cancelling jobs, closing sandboxes\n`);
        // A hung close must not keep the process alive past the grace period.
        const force = setTimeout(() => {
          process.stderr.write(`raas serve: shutdown_grace_s (${config.shutdown_grace_s} s) passed; exiting\n`);
          process.exit(0);
        }, config.shutdown_grace_s * 1000);
        force.unref();
        void server.close().then(
          () => process.exit(0),
          (err: unknown) => {
            process.stderr.write(`raas serve: close failed: ${err instanceof Error ? err.message : String(err)}\n`);
            process.exit(0);
          },
        );
      };
      process.once('SIGINT', () => stop('SIGINT'));
      process.once('SIGTERM', () => stop('SIGTERM'));
    });
}
