import Fastify from 'fastify';
import { qwen3Tokenizer } from '../tokens/tokenizer.js';
import { resolveTokenizerSpec } from '../tokens/resolve.js';
import { RaasError, fieldPath } from '../protocol/errors.js';
import { systemClock, type Clock } from '../util/clock.js';
import { loadPolicies } from './policies/index.js';
import { loadPolicyModules } from './policies/modules.js';
import type { SimPolicy } from './policy.js';
import { SimEngine, type SimLogEntry, type SimOutput, type SimRequest } from './engine.js';
import { SimOptions, type SimConfig } from './options.js';
import { registerVllmRoutes, vllmError } from './vllm.js';
import { registerSglangRoutes } from './sglang.js';
import { registerTokenizeRoutes } from './tokenize.js';
import { renderMetrics } from './metrics.js';

export { SimOptions, REALISTIC_LATENCY } from './options.js';
export { parseMetrics } from './metrics.js';

/** A running simulated backend. */
export interface SimHandle {
  url: string;
  port: number;
  /** Stops the server; in-flight requests are aborted. Safe to call twice. */
  close(): Promise<void>;
  /** What the backend sent back, newest last (only with `request_log > 0`). */
  readonly requestLog: readonly SimLogEntry[];
  /** The backend's current weight version. */
  readonly weightVersion: string;
  /** The resolved options. */
  readonly config: SimConfig;
  /** Generates in-process, bypassing HTTP (same engine, cache, counters and log): for large test sweeps. */
  generate(req: SimRequest, signal?: AbortSignal): Promise<SimOutput>;
}

/** Injected collaborators: a clock for the latency model, extra policies asked before the dataset ones. */
export interface SimDeps {
  clock?: Clock;
  policies?: SimPolicy[];
}

/**
 * Starts a simulated LLM backend speaking vLLM's `/v1/completions` and SGLang's `/generate` (plus
 * their control routes, `/health`, `/v1/models`, `/metrics`) with real token ids of its tokenizer.
 */
export async function startSim(opts: SimOptions = {}, deps: SimDeps = {}): Promise<SimHandle> {
  const parsed = SimOptions.safeParse(opts);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new RaasError('config_invalid', `sim: ${fieldPath(issue.path)}: ${issue.message}`);
  }
  const cfg = parsed.data;
  // A folder, a Hugging Face model id from the local hub cache, or Qwen3 (bundled).
  const tokenizer = cfg.tokenizer ? resolveTokenizerSpec(cfg.tokenizer) : qwen3Tokenizer();
  const modules = await loadPolicyModules(cfg.policies);
  const policies = [
    ...(deps.policies ?? []),
    ...modules.policies,
    ...(await loadPolicies(
      cfg.datasets,
      { seed: cfg.seed, alpha: cfg.policy.alpha, beta: cfg.policy.beta, harnesses: true },
      modules.scripts,
    )),
  ];
  const engine = new SimEngine(cfg, tokenizer, policies, deps.clock ?? systemClock);

  const app = Fastify({ logger: false, bodyLimit: 256 * 1024 * 1024, keepAliveTimeout: 60_000, forceCloseConnections: true });
  // vLLM answers validation errors with 400 in its error shape, never FastAPI's 422.
  app.setErrorHandler((err: Error & { statusCode?: number }, _request, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    return vllmError(reply, status, err.message);
  });
  app.setNotFoundHandler((request, reply) => reply.code(404).send({ detail: `Not Found: ${request.method} ${request.url}` }));
  app.get('/health', async (_request, reply) => reply.code(200).send(''));
  app.get('/metrics', async (_request, reply) => reply.type('text/plain; version=0.0.4; charset=utf-8').send(renderMetrics(engine)));
  registerVllmRoutes(app, engine);
  registerSglangRoutes(app, engine);
  registerTokenizeRoutes(app, engine);

  await app.listen({ port: cfg.port, host: cfg.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : cfg.port;
  const host = cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    port,
    close() {
      closing ??= (async () => {
        engine.abortAll('server shutting down');
        await app.close();
      })();
      return closing;
    },
    get requestLog() {
      return engine.log;
    },
    get weightVersion() {
      return engine.weightVersion;
    },
    config: cfg,
    generate: (req, signal) => engine.generate(req, signal),
  };
}
