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
  workers?: 'auto';
  join?: string;
  joinTokenFile?: string;
  joinTokenEnv?: string;
  nodeId?: string;
  publicUrl?: string;
  heartbeatInterval?: number;
  joinLlm?: string[];
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
  const workers: Record<string, number | 'auto'> = f.workers === 'auto' ? { init: 'auto', run: 'auto', eval: 'auto' } : {};
  if (f.workersInit !== undefined) workers.init = f.workersInit;
  if (f.workersRun !== undefined) workers.run = f.workersRun;
  if (f.workersEval !== undefined) workers.eval = f.workersEval;
  if (Object.keys(workers).length) o.workers = workers;
  if (f.join !== undefined) {
    const join: Record<string, unknown> = { url: f.join };
    if (f.joinTokenFile !== undefined) join.token_file = path.resolve(f.joinTokenFile);
    if (f.joinTokenEnv !== undefined) join.token_env = f.joinTokenEnv;
    if (f.nodeId !== undefined) join.node_id = f.nodeId;
    if (f.publicUrl !== undefined) join.public_url = f.publicUrl;
    if (f.heartbeatInterval !== undefined) join.heartbeat_interval_s = f.heartbeatInterval;
    if (f.joinLlm?.length) join.backends = f.joinLlm.map(joinBackend);
    o.join = join;
  }
  const llm: Record<string, unknown> = {};
  if (f.routing !== undefined) llm.routing = f.routing;
  if (f.llm?.length) llm.backends = f.llm.map((address) => ({ address, api: f.api }));
  if (Object.keys(llm).length) o.llm = llm;
  // Flag paths are relative to the working directory (config-file paths to the file's folder).
  if (f.handler?.length) o.handler_modules = f.handler.map((h) => path.resolve(h));
  return o as ServerConfigInput;
}

/** `--join-llm [tenant=]address[,api]`: an LLM server on this node, offered to the trainers (for one tenant's trainer). */
function joinBackend(spec: string): { address: string; api?: string; tenant?: string } {
  const eq = spec.indexOf('=');
  const tenant = eq > 0 && !spec.slice(0, eq).includes('/') ? spec.slice(0, eq) : undefined;
  const [address, api] = (tenant ? spec.slice(eq + 1) : spec).split(',');
  return { address: address!, ...(api ? { api } : {}), ...(tenant ? { tenant } : {}) };
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
        ['raas serve --workers auto', 'INIT, RUN and EVAL pools sized from their queues and service times, within budgets'],
        [
          'raas serve --token-env RAAS_TOKEN --join http://127.0.0.1:8006 --join-llm http://127.0.0.1:9000',
          "join a fleet's registry (any raas serve), offering this node's LLM server; POST /drain leaves it",
        ],
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
    .addOption(
      new Option(
        '--workers <mode>',
        'size INIT, RUN and EVAL from their queues and service times (see autosize in docs/operations.md)',
      ).choices(['auto']),
    )
    .option('--join <url>', 'register with this registry (any raas serve) and heartbeat to it; trainers reading it use this server')
    .option('--join-token-file <file>', "the registry's admin token, from a file (default: this server's own token)")
    .option('--join-token-env <name>', "the registry's admin token, from an environment variable")
    .option('--node-id <id>', 'this server in the registry (default: host:port of its URL)')
    .option('--public-url <url>', 'the URL trainers reach this server at (default http://<host>:<port>)')
    .option('--heartbeat-interval <s>', 'seconds between heartbeats (default 5)', numberArg('--heartbeat-interval', { positive: true }))
    .option('--join-llm <llm...>', 'LLM servers on this node, offered to the trainers, who place them here: [tenant=]address[,api]')
    .option('--set <key=value>', setHelp('workers.run=32'), collect)
    .action(async (flags: ServeFlags) => {
      const { config, baseDir } = await loadServerConfig(flags.config, overridesOf(flags), flags.set);
      let leave: ((code: number) => void) | undefined;
      const server = await startRolloutServer(config, {
        baseDir,
        // POST /drain (or a drain asked at the registry) is over: close and exit.
        onDrained: (r) => {
          process.stderr.write(`raas serve: drained (${r.finished} jobs finished, ${r.cancelled} cancelled); leaving\n`);
          leave?.(0);
        },
      });
      // The tokenizer loads at the first job that needs it (~1.5 s of CPU), so sandbox-less or
      // tokenizer-less handler sets start at once.
      const backends = server.tenants.list.reduce((n, t) => n + t.pool.size, 0);
      const tenants = server.tenants.multi ? `, ${server.tenants.list.length} tenants` : '';
      process.stdout.write(`raas serve listening on ${server.url} (routing ${config.llm.routing}, ${backends} LLM backend(s)${tenants})\n`);
      if (config.console.enabled) process.stdout.write(`raas serve: console at ${server.url}/ui (docs/console.md)\n`);
      let stopping = false;
      const stop = (signal: string): void => {
        if (stopping) return;
        stopping = true;
        if (signal !== 'drained') process.stderr.write(`raas serve: ${signal}: closing intake, cancelling jobs, closing sandboxes\n`);
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
      leave = () => stop('drained');
      process.once('SIGINT', () => stop('SIGINT'));
      process.once('SIGTERM', () => stop('SIGTERM'));
    });
}
