import { z } from 'zod';
import { SweHandlerConfig } from './tasks.js';
import { BackendConfig, TenantsConfig } from './config-tenants.js';
import { AutosizeConfig, WorkersConfig } from './config-workers.js';
import { HarnessHandlerConfig } from './harness.js';
import { NodeBackend } from './nodes.js';

/** LLM backend pool: routing, affinity, client retries. */
export const LlmPoolConfig = z.strictObject({
  /** `active` (default): least jobs in RUN; `assigned`: the paper's key; `round_robin`: per request. */
  routing: z.enum(['active', 'assigned', 'round_robin']).default('active'),
  /** Keep a group's jobs on one backend while its load is within `affinity_margin` of the least loaded. */
  group_affinity: z.boolean().default(true),
  /** Default 8 (the default group size n): a group entering RUN at once can all land on one backend. */
  affinity_margin: z.number().int().nonnegative().default(8),
  /** Backends registered at start. */
  backends: z.array(BackendConfig).default([]),
  /** `model` field sent to vLLM; when unset, the first id of the backend's /v1/models (or none). */
  model: z.string().max(512).optional(),
  /** Connection errors and 5xx answers are retried this many times per backend, with capped backoff. */
  retries: z.number().int().nonnegative().max(100).default(3),
  backoff_base_ms: z.number().nonnegative().default(200),
  backoff_max_ms: z.number().nonnegative().default(5_000),
  /** A job whose backend stays down moves to a live one at most this many times. */
  max_moves: z.number().int().nonnegative().default(3),
  /** Hard limit on one LLM HTTP call. */
  request_timeout_s: z.number().positive().default(3_600),
  /**
   * Deadline of one call: `deadline_base_s` + max_tokens × `deadline_per_token_ms` (capped by
   * `request_timeout_s`), so a call to a hung backend ends, and its job moves, well within `timeout_s`.
   */
  deadline_base_s: z.number().positive().default(60),
  deadline_per_token_ms: z.number().nonnegative().default(100),
  /** Consecutive connection failures or timeouts (calls and probes) that mark a backend unhealthy: no new work until a probe answers. */
  unhealthy_after: z.number().int().positive().max(1_000).default(3),
  /** Every backend is probed (GET /health) this often; an unhealthy one comes back at its first answer. */
  probe_interval_s: z.number().min(0.01).max(3_600).default(2),
  probe_timeout_s: z.number().min(0.01).max(600).default(5),
});

/** The live console (`/ui`) and the event stream (`GET /events`). */
const ConsoleConfig = z.strictObject({
  /** Serve `/ui` (the console's pages and their JSON). `GET /events` is part of the API and always served. */
  enabled: z.boolean().default(true),
  /** Events `GET /events` keeps for clients that resume with Last-Event-ID (older ones answer `reset`). */
  event_buffer: z.number().int().min(16).max(10_000_000).default(10_000),
  /** Open `GET /events` streams per token (per tenant, the admin, or everyone on a server without a token); one more answers 429. */
  max_streams: z.number().int().min(1).max(10_000).default(8),
  /** Finished jobs the console lists (the newest; any job within result_ttl_s still opens by id). */
  recent_jobs: z.number().int().min(0).max(1_000_000).default(10_000),
  /** Seconds between reads of each backend's /metrics (prefix-cache hits, engine queue) while a console is open; 0: never. */
  backend_metrics_s: z.number().min(0).max(3_600).default(5),
});

/** Results journal: finished results appended as JSON lines and reloaded at start. */
const JournalConfig = z.strictObject({
  /** Directory of `results.jsonl`; null turns the journal off. Give each server its own directory. */
  dir: z.string().min(1).nullable().default(null),
});

/** `raas serve --join <url>`: register with a registry, heartbeat, and leave it when drained. */
const JoinConfig = z.strictObject({
  /** The registry: any raas serve (its /nodes routes) or a raas registry. */
  url: z.string().url(),
  /** Bearer token for the registry (its admin token); default: this server's own token. */
  token: z.string().min(8).optional(),
  token_file: z.string().min(1).optional(),
  token_env: z.string().min(1).optional(),
  /** This server's id in the registry; default: its URL's host:port. */
  node_id: z.string().min(1).max(256).optional(),
  /** The URL trainers reach this server at; default http://<host>:<port> (required when host is 0.0.0.0 or ::). */
  public_url: z.string().url().optional(),
  heartbeat_interval_s: z.number().min(0.05).max(3600).default(5),
  /** LLM servers on this node, offered for placement: trainers place them here (node-affine). */
  backends: z.array(NodeBackend).default([]),
});

/** The /nodes routes this server hosts (a registry other servers join). */
const RegistryConfig = z.strictObject({
  enabled: z.boolean().default(true),
  /** A node that missed this many heartbeats in a row counts as dead (healthy: false). */
  missed_heartbeats: z.number().int().positive().max(100).default(3),
  /** A dead node is forgotten after this many seconds without a heartbeat. */
  forget_after_s: z.number().positive().default(600),
});

/**
 * The rollout server's configuration (YAML of `raas serve --config`). Every field has a default;
 * CLI flags override file values.
 */
export const ServerConfig = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(0).max(65_535).default(8006),
  /** Bearer token required on every route but GET /health; mandatory for non-loopback binds. */
  token: z.string().min(8, 'token must be at least 8 characters').optional(),
  /** A file holding the token (relative to the config file's folder), readable by its owner only (chmod 600). */
  token_file: z.string().min(1).optional(),
  /** The name of an environment variable holding the token (the command line then shows only the name). */
  token_env: z.string().min(1).optional(),
  /** Allow a non-loopback bind without a token. */
  insecure: z.boolean().default(false),
  /** Open intake at boot. */
  autostart: z.boolean().default(true),
  /** Slots of each stage: numbers, `auto` (self-sizing), or `{min, max}` bounds of an auto stage; `workers: auto` for all three. */
  workers: WorkersConfig.default({ init: 16, run: 64, eval: 16 }),
  /** How `auto` stages are sized. */
  autosize: AutosizeConfig.default(AutosizeConfig.parse({})),
  /**
   * Tenants of a shared server: each with its token, weight, priority class, quotas and LLM
   * backends. Without this section the server has one tenant and `token` is the only credential;
   * with it, `token` is the admin token (server-wide routes) and each tenant uses its own.
   */
  tenants: TenantsConfig.optional(),
  /** Register with a registry and heartbeat to it (`raas serve --join <url>`). */
  join: JoinConfig.optional(),
  registry: RegistryConfig.default(RegistryConfig.parse({})),
  /** POST /drain: jobs still unfinished after this many seconds are cancelled (their trainers resubmit them elsewhere). */
  drain_timeout_s: z.number().positive().default(600),
  /** Counted (in-stage) seconds a job may use; /process may lower or raise it per job. */
  timeout_s: z.number().positive().default(600),
  /** How long finished results answer GET /jobs/:id (and attach resubmissions). */
  result_ttl_s: z.number().nonnegative().default(3_600),
  /**
   * Finished results kept in memory (the newest); older ones within `result_ttl_s` answer from the
   * results journal (`journal.dir`), or are forgotten without one.
   */
  max_kept_results: z.number().int().nonnegative().default(4_096),
  /** Jobs waiting in the three queues together; over it /process answers 503 queue_full. */
  max_queued_jobs: z.number().int().positive().default(4_096),
  /** Retry-After seconds on 503 answers. */
  retry_after_s: z.number().int().nonnegative().default(1),
  /**
   * POST /process keys the server does not read (a misspelt `sampling_params` key, an unknown
   * top-level key): `warn` (default, ProRL's leniency: ignored, counted, named in a `Warning`
   * response header) or `reject` (400 `unknown_key`). A request's `Prefer: handling=strict` or
   * `handling=lenient` (RFC 7240) overrides it.
   */
  unknown_request_keys: z.enum(['warn', 'reject']).default('warn'),
  body_limit_bytes: z
    .number()
    .int()
    .positive()
    .default(8 * 1024 * 1024),
  /** How long a cancelled or timed-out stage may take to hand back its partial result before the answer goes out anyway. */
  cancel_grace_ms: z.number().int().nonnegative().default(100),
  /** SIGTERM/SIGINT: seconds to cancel, close sandboxes and answer waiters before exiting. */
  shutdown_grace_s: z.number().positive().default(10),
  /** `qwen3` (bundled), a folder with tokenizer.json and tokenizer_config.json, or a Hugging Face model id in the local hub cache (src/tokens/resolve.ts). */
  tokenizer: z.string().min(1).default('qwen3'),
  /**
   * Long texts (observations, prompts) are encoded on worker threads, so a tool's flood of output
   * never stalls the event loop; each worker holds its own copy of the tokenizer (~200 MB for
   * Qwen3). `workers: 0` encodes everything on the main thread.
   */
  tokenizer_pool: z
    .strictObject({
      workers: z.number().int().min(0).max(64).default(1),
      /** Texts shorter than this many characters are encoded on the main thread. */
      min_chars: z.number().int().min(1).default(2048),
    })
    .default({ workers: 1, min_chars: 2048 }),
  llm: LlmPoolConfig.default(LlmPoolConfig.parse({})),
  journal: JournalConfig.default(JournalConfig.parse({})),
  console: ConsoleConfig.default(ConsoleConfig.parse({})),
  /** Handler modules loaded by path (default export: a handler or an array); relative to the config file. */
  handler_modules: z.array(z.string().min(1)).default([]),
  /** Per-handler settings, `handlers.<name>`, handed to the handler as `ctx.config` (`handlers.swe` checked here: its host paths). */
  handlers: z
    .object({ swe: SweHandlerConfig.optional(), harness: HarnessHandlerConfig.optional() })
    .catchall(z.record(z.string(), z.unknown()))
    .default({}),
  /** Sandbox runtime settings, validated by the sandbox's own SandboxConfig when the first sandbox opens. */
  sandbox: z.record(z.string(), z.unknown()).default({}),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('warn'),
});
export type ServerConfig = z.infer<typeof ServerConfig>;
/** What callers may pass: any subset, defaults fill the rest. */
export type ServerConfigInput = z.input<typeof ServerConfig>;
