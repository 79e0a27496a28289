import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { RaasError } from '../protocol/errors.js';
import { ServerConfig, type ServerConfigInput } from '../protocol/config-server.js';
import { parseOrThrow } from '../protocol/validation.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { Tokenizer } from '../tokens/tokenizer.js';
import { offloadTokenizer, type EncoderPool } from '../tokens/pool.js';
import { resolveTokenizerSpec } from '../tokens/resolve.js';
import { TokenizerGuard } from '../tokens/backend-check.js';
import { buildApp } from './app.js';
import { assertBindAllowed } from './auth.js';
import { HandlerRegistry, builtinHandlers } from './handlers/registry.js';
import { loadHandlerModules } from './handlers/load.js';
import type { AgentHandler } from './handlers/types.js';
import { BackendPool, defaultClientFactory, type ClientFactory } from './llm/pool.js';
import { ServerMetrics } from './metrics.js';
import { ConsoleFeed } from './console/feed.js';
import { EngineStatsReader } from './console/engine-stats.js';
import { ResultsJournal } from './pipeline/journal.js';
import { Pipeline } from './pipeline/pipeline.js';
import { TenantSet } from './tenants/tenants.js';
import { NodeRegistry } from './registry/registry.js';
import { nodeRoutes } from './registry/routes.js';
import { NodeMember } from './registry/member.js';
import { resolveToken } from '../util/secret.js';
import type { StatusResponse } from '../protocol/status.js';

export { HandlerRegistry, builtinHandlers } from './handlers/registry.js';
export { loadHandlerModules } from './handlers/load.js';
export { chatHandler, ChatInstance, CHAT_USER_MESSAGE } from './handlers/chat.js';
export { BackendPool, Backend } from './llm/pool.js';
export { VllmClient } from './llm/vllm.js';
export { SglangClient } from './llm/sglang.js';
export { JobLlmSession } from './llm/session.js';
export { lengthLimits, nextMaxTokens } from './llm/limits.js';
export { PausableTimer } from './pipeline/timer.js';
export { Pipeline } from './pipeline/pipeline.js';
export { isLoopbackHost } from './auth.js';
export { loadServerConfig } from './config.js';
export { ServerConfig } from '../protocol/config-server.js';
export type { ServerConfigInput } from '../protocol/config-server.js';

/** Collaborators a caller may inject (tests, the bench, embedding). */
export interface RolloutServerOptions {
  /** Extra handlers, registered over the built-ins and the config's handler_modules. */
  handlers?: AgentHandler<unknown>[];
  registry?: HandlerRegistry;
  clock?: Clock;
  wallNow?: () => number;
  tokenizer?: Tokenizer;
  clientFactory?: ClientFactory;
  /** Base directory for relative handler_modules paths (the config file's folder). */
  baseDir?: string;
  /** Called once a drain (POST /drain, or one asked at the registry) is over: the server took nothing new, finished what it held and left its registry. `raas serve` exits then. */
  onDrained?: (report: DrainReport) => void;
}

/** What a drain did: jobs finished, and jobs cancelled at drain_timeout_s (their trainers run them elsewhere). */
export interface DrainReport {
  finished: number;
  cancelled: number;
}

/** A listening rollout server. */
export interface RolloutServer {
  url: string;
  port: number;
  config: ServerConfig;
  app: FastifyInstance;
  pipeline: Pipeline;
  /** The LLM backend pool of the implicit tenant (of the first tenant on a multi-tenant server). */
  pool: BackendPool;
  /** The server's tenants (one implicit tenant without a `tenants:` section). */
  tenants: TenantSet;
  /** Job and backend events (GET /events) and what the console keeps of them. */
  feed: ConsoleFeed;
  /** Loads the tokenizer now instead of at the first job (raas serve does this before announcing its URL). */
  warmTokenizer(): Tokenizer;
  /**
   * Takes nothing new (503 server_draining), finishes what it holds (cancelling what is left after
   * drain_timeout_s), then leaves its registry; resolves then. Safe twice. HTTP stays up: close() after.
   */
  drain(): Promise<DrainReport>;
  /** Stops intake, cancels every job, closes sandboxes, answers every waiter, then closes HTTP. Safe twice. */
  close(): Promise<void>;
}

/**
 * `join:` — this server's membership of a registry: its id and public URL, its token for the
 * registry (default its own), and what it reports at each heartbeat.
 */
function joinRegistry(
  cfg: ServerConfig,
  url: string,
  baseDir: string | undefined,
  pipeline: Pipeline,
  clock: Clock,
  log: { info(o: unknown, m?: string): void; warn(o: unknown, m?: string): void },
  onDrainRequested: () => void,
): NodeMember {
  const j = cfg.join!;
  if (!j.public_url && (cfg.host === '0.0.0.0' || cfg.host === '::'))
    throw new RaasError(
      'config_invalid',
      `join.public_url: this server binds ${cfg.host}; give the URL trainers reach it at (--public-url)`,
      {
        retryable: false,
      },
    );
  const public_url = (j.public_url ?? url).replace(/\/+$/, '');
  const file = j.token_file === undefined ? undefined : path.resolve(baseDir ?? process.cwd(), j.token_file);
  const token = resolveToken({ token: j.token, token_file: file, token_env: j.token_env }, 'join') ?? cfg.token;
  return new NodeMember({
    registry: j.url.replace(/\/+$/, ''),
    token,
    nodeId: j.node_id ?? new URL(public_url).host,
    url: public_url,
    intervalMs: j.heartbeat_interval_s * 1000,
    backends: j.backends,
    clock,
    log,
    onDrainRequested,
    source: {
      sizes: () => ({ init: pipeline.pools.init.size, run: pipeline.pools.run.size, eval: pipeline.pools.eval.size }),
      draining: () => pipeline.isDraining,
      metrics: () => {
        const st = pipeline.status() as StatusResponse;
        return {
          init_queue_depth: st.queues.init,
          init_inflight: st.init,
          ready_depth: st.queues.run,
          run_inflight: st.run,
          postrun_queue_depth: st.queues.eval,
          postrun_inflight: st.eval,
        };
      },
    },
  });
}

/** A logger whose lines name the tenant (its pool's breaker messages). */
function tagged<L extends { info(o: unknown, m?: string): void; warn(o: unknown, m?: string): void }>(log: L, tenant: string): L {
  return {
    ...log,
    info: (o: unknown, m?: string) => log.info({ tenant, ...(o as object) }, m),
    warn: (o: unknown, m?: string) => log.warn({ tenant, ...(o as object) }, m),
  };
}

/** Resolves the `tokenizer` setting: `qwen3` (bundled) or a tokenizer folder. */
export function resolveTokenizer(name: string, baseDir = process.cwd()): Tokenizer {
  // `qwen3` (bundled), a folder, or a Hugging Face model id from the local hub cache.
  return resolveTokenizerSpec(name, baseDir);
}

/**
 * Starts a rollout server: validates the config (every field defaulted), loads handler modules,
 * reloads the results journal, registers boot backends and listens.
 */
export async function startRolloutServer(config: ServerConfigInput = {}, opts: RolloutServerOptions = {}): Promise<RolloutServer> {
  const cfg = parseOrThrow(ServerConfig, config, 'config_invalid');
  // Tenants authenticate with their own tokens, so a multi-tenant server is never open.
  assertBindAllowed(cfg.host, cfg.token ?? (cfg.tenants ? 'tenant tokens' : undefined), cfg.insecure);
  const registry = opts.registry ?? new HandlerRegistry(builtinHandlers());
  for (const h of await loadHandlerModules(cfg.handler_modules, opts.baseDir)) registry.register(h, { replace: true });
  for (const h of opts.handlers ?? []) registry.register(h, { replace: true });
  const clock = opts.clock ?? systemClock;
  let tok: Tokenizer | undefined;
  let encoderPool: EncoderPool | undefined;
  const tokenizer = (): Tokenizer => {
    if (tok) return tok;
    const loaded = opts.tokenizer ?? resolveTokenizer(cfg.tokenizer, opts.baseDir);
    const off = offloadTokenizer(loaded, { workers: cfg.tokenizer_pool.workers, minChars: cfg.tokenizer_pool.min_chars });
    encoderPool = off?.pool;
    return (tok = off?.tokenizer ?? loaded);
  };

  let pipeline!: Pipeline;
  const metrics = new ServerMetrics({
    queueDepth: (s) => pipeline.pools[s].depth,
    busyWorkers: (s) => pipeline.pools[s].busy,
    workerSize: (s) => pipeline.pools[s].size,
    backends: () => tenants.list.flatMap((t) => t.pool.list()),
    offloadedChars: () => encoderPool?.offloadedChars ?? 0,
    tenants: () => tenants.list.map((t) => ({ name: t.name, queued: t.queued, running: t.inStage })),
  });
  // The pipeline logs through fastify's logger, which exists only once the app does.
  const logRef: { log?: FastifyInstance['log'] } = {};
  const log = {
    debug: (o: unknown, m?: string) => logRef.log?.debug(o, m),
    info: (o: unknown, m?: string) => logRef.log?.info(o, m),
    warn: (o: unknown, m?: string) => logRef.log?.warn(o, m),
    error: (o: unknown, m?: string) => logRef.log?.error(o, m),
  };
  const wallNow = opts.wallNow ?? Date.now;
  const feed = new ConsoleFeed(
    { eventBuffer: cfg.console.event_buffer, recentJobs: cfg.console.recent_jobs, tenants: !!cfg.tenants },
    wallNow,
  );
  const factory = opts.clientFactory ?? defaultClientFactory({ model: cfg.llm.model, requestTimeoutMs: cfg.llm.request_timeout_s * 1000 });
  const makePool = (tenant: string): BackendPool =>
    new BackendPool(cfg.llm, factory, Math.random, {
      clock,
      log: tenant === 'default' ? log : tagged(log, tenant),
      // Backend events name their tenant on a server with tenants.
      onChange: (b, change) => feed.backendChange(b, change, cfg.tenants ? tenant : undefined),
    });
  if (cfg.tenants && cfg.llm.backends.length > 0)
    throw new RaasError(
      'config_invalid',
      'llm.backends: with tenants, each backend belongs to one tenant: list it under tenants[].backends',
      {
        retryable: false,
      },
    );
  const tenants = cfg.tenants
    ? TenantSet.fromConfig(cfg.tenants, makePool, opts.baseDir ?? process.cwd(), cfg.token)
    : TenantSet.single(makePool('default'));
  const pool = tenants.list[0]!.pool;
  const boot = cfg.tenants
    ? cfg.tenants.flatMap((t, i) => t.backends.map((b) => ({ ...b, pool: tenants.list[i]!.pool })))
    : cfg.llm.backends.map((b) => ({ ...b, pool }));
  const engine = new EngineStatsReader({
    everyS: cfg.console.backend_metrics_s,
    clock,
    wallNow,
    backends: () => tenants.list.flatMap((t) => t.pool.list().map((b) => b.address)),
  });
  // Each configured backend's tokenizer is checked against ours first: a mismatch stops the start.
  const tokenizerGuard = new TokenizerGuard(tokenizer);
  for (const b of boot) {
    const c = await tokenizerGuard.check(b.address, b.api ?? 'vllm');
    if (c.warning && cfg.log_level !== 'silent') process.stderr.write(`raas: ${c.warning}\n`);
  }
  for (const b of boot) b.pool.add(b.address, b.api ?? 'vllm', b.weight_version);
  pipeline = new Pipeline({
    config: cfg,
    registry,
    pool,
    tokenizer,
    clock,
    wallNow: opts.wallNow,
    log,
    journal: cfg.journal.dir ? new ResultsJournal(path.resolve(cfg.journal.dir)) : undefined,
    tenants,
    observer: {
      jobEnded: (s, t) => metrics.jobEnded(s, t),
      queueWait: (s, t, sec) => metrics.waited(s, t, sec),
      slotHeld: (s, t, sec) => metrics.held(s, t, sec),
      foreignLookup: (t) => metrics.foreignLookup(t),
      stage: (s, sec) => metrics.stage(s, sec),
      llmCall: (api, sec) => metrics.llmCall(api, sec),
      move: () => metrics.move(),
      ignoredKey: (k) => metrics.ignoredKey(k),
      jobState: (job, from, result) => feed.jobState(job, from, result),
    },
  });
  // Only a server configured for sandboxes loads the sandbox code at start.
  if (Object.keys(cfg.sandbox).length > 0) await pipeline.sandboxes.validate();
  await pipeline.openJournal();
  const nodes = cfg.registry.enabled ? new NodeRegistry(cfg.registry, clock) : undefined;
  let member: NodeMember | undefined;
  let draining: Promise<DrainReport> | undefined;
  const drain = (): Promise<DrainReport> => {
    draining ??= (async () => {
      const report = await pipeline.drain(cfg.drain_timeout_s * 1000);
      await member?.leave();
      log.info(report, 'drained');
      opts.onDrained?.(report);
      return report;
    })();
    return draining;
  };
  const app = buildApp({
    config: cfg,
    pipeline,
    metrics,
    tokenizerGuard,
    console: { feed, engine, tokenizer, clock, wallNow },
    drain: () => void drain(),
    plugins: nodes ? [nodeRoutes(nodes)] : [],
  });
  logRef.log = app.log;
  try {
    // A coordinator opens one connection per held /process answer: thousands may arrive at once.
    await app.listen({ host: cfg.host, port: cfg.port, backlog: 4096 });
  } catch (err) {
    await pipeline.close();
    tenants.close();
    engine.close();
    throw new RaasError('config_invalid', `cannot listen on ${cfg.host}:${cfg.port}: ${(err as Error).message}`, { cause: err });
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : cfg.port;
  const host = cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host;
  const url = `http://${host}:${port}`;
  if (cfg.join) {
    member = joinRegistry(cfg, url, opts.baseDir, pipeline, clock, log, () => void drain());
    await member.start();
  }
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    config: cfg,
    app,
    pipeline,
    pool,
    tenants,
    feed,
    warmTokenizer: tokenizer,
    drain,
    close() {
      closing ??= (async () => {
        // Trainers learn at once that it is gone, instead of after its missed heartbeats.
        if (member && !draining) await member.leave();
        member?.close();
        await pipeline.close();
        tenants.close();
        engine.close();
        await app.close();
        await encoderPool?.close();
      })();
      return closing;
    },
  };
}
