/**
 * `npm run bench:gateway`: what the agent gateway adds to a model call, at 64 concurrent jobs.
 *
 * A simulated vLLM backend (zero latency model, its own process) answers every call with filler
 * text. 64 jobs, each with its own gateway endpoint and its own loopback relay process (the path a
 * harness's calls take: HTTP → relay → Unix socket → gateway → token-in/token-out call), hold an
 * 8-turn conversation in OpenAI chat completions. Measured side by side in one run:
 *   - gateway: the harness's wall time per call;
 *   - inside: the token-in/token-out backend call the gateway made for it (same call, paired);
 *   - direct: the same recorded requests replayed straight at the backend, 64 at a time (baseline).
 * Added latency = gateway − inside, per call (floor 0). Per-job memory: the gateway host's heap and
 * buffers after the run over 64 jobs, and one relay process's RSS.
 * Flags: --jobs N (64), --turns N (8), --json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { JobGateway } from '../src/server/gateway/engine.js';
import { GatewayHost } from '../src/server/gateway/host.js';
import { toolParser } from '../src/server/gateway/tool-parsers.js';
import type { GenerateRequest, GenerateResult, LlmSession } from '../src/server/llm/types.js';
import { qwen3Tokenizer } from '../src/tokens/tokenizer.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name: string, d: number): number => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : d;
};
const JOBS = arg('--jobs', 64);
const TURNS = arg('--turns', 8);

interface Recorded {
  body: Record<string, unknown>;
  ms: number;
}

/** A token-in/token-out session over the backend's vLLM route that records each call and its time. */
class TimedSession implements LlmSession {
  readonly turns: Array<{ backend: string; weight_version: string }> = [];
  readonly recorded: Recorded[] = [];
  private n = 0;
  constructor(
    private readonly url: string,
    private readonly job: number,
  ) {}
  get backend(): string {
    return this.url;
  }
  async maxModelLen(): Promise<number> {
    return 32768;
  }
  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const body = {
      model: 'm',
      prompt: req.prompt_ids,
      max_tokens: req.max_tokens,
      seed: this.job * 1000 + this.n++,
      logprobs: 0,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
      stop_token_ids: req.stop_token_ids ?? [],
    };
    const t0 = performance.now();
    const c = await complete(this.url, body, req.signal);
    this.recorded.push({ body, ms: performance.now() - t0 });
    return {
      ids: c.token_ids,
      logprobs: c.logprobs.token_logprobs,
      finish_reason: c.finish_reason as GenerateResult['finish_reason'],
      weight_version: '0',
      backend: this.url,
    };
  }
}

/** The gateway, timing its own complete() (placement, tokenising, the backend call, decoding, parsing). */
class TimedGateway extends JobGateway {
  readonly spent: number[] = [];
  override async complete(...args: Parameters<JobGateway['complete']>): ReturnType<JobGateway['complete']> {
    const t0 = performance.now();
    const a = await super.complete(...args);
    this.spent.push(performance.now() - t0);
    return a;
  }
}

async function complete(
  url: string,
  body: unknown,
  signal?: AbortSignal,
): Promise<{ token_ids: number[]; logprobs: { token_logprobs: number[] }; finish_reason: string }> {
  const r = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
  if (r.status !== 200) throw new Error(`backend answered ${r.status}: ${await r.text()}`);
  return ((await r.json()) as { choices: Array<{ token_ids: number[]; logprobs: { token_logprobs: number[] }; finish_reason: string }> })
    .choices[0]!;
}

function firstLine(child: ChildProcess, stream: 'stdout' | 'stderr', re: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child[stream]! });
    rl.on('line', (l) => {
      const m = re.exec(l);
      if (m) {
        rl.close();
        resolve(m);
      }
    });
    child.once('exit', (c) => reject(new Error(`${child.spawnargs.join(' ')} exited ${c}`)));
  });
}

function q(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))] ?? Number.NaN;
}

function rssKb(pid: number): number {
  const st = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+)/m.exec(st)?.[1] ?? 0);
}

async function main(): Promise<void> {
  const load = os.loadavg();
  const sim = spawn(
    process.execPath,
    [path.join(root, 'dist/src/cli.js'), 'sim-llm', '--port', '0', '--no-bundled-datasets', '--seed', '1'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const children: ChildProcess[] = [sim];
  try {
    const url = (
      await Promise.race([firstLine(sim, 'stdout', /listening on (http:\/\/\S+)/), firstLine(sim, 'stderr', /listening on (http:\/\/\S+)/)])
    )[1]!;
    const tok = qwen3Tokenizer();
    global.gc?.();
    const before = process.memoryUsage();
    const host = await GatewayHost.start();
    const jobs = await Promise.all(
      Array.from({ length: JOBS }, async (_, j) => {
        const session = new TimedSession(url, j);
        const gateway = new TimedGateway({
          llm: session,
          tokenizer: tok,
          sampling: { enable_thinking: false, max_tokens_per_turn: 128 },
          parser: toolParser('hermes'),
          maxTokensPerTurn: 128,
        });
        const ep = host.endpoint();
        await ep.attach(gateway, new AbortController().signal);
        const relay = spawn(process.execPath, [ep.relay, JSON.stringify({ socket: ep.socket })], { stdio: ['pipe', 'pipe', 'inherit'] });
        children.push(relay);
        const port = Number((await firstLine(relay, 'stdout', /"port":(\d+)/))[1]);
        return { j, session, gateway, relay, base: `http://127.0.0.1:${port}/v1`, wall: [] as number[] };
      }),
    );
    // Gateway phase: 64 conversations at once, each call through its relay, driven from another
    // process (as harnesses are), so this one does only what raas serve does.
    const driver = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--driver', String(TURNS)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(driver);
    driver.stdin!.end(JSON.stringify(jobs.map((j) => ({ j: j.j, base: j.base }))));
    const walls = JSON.parse((await firstLine(driver, 'stdout', /^(\[.*\])$/))[1]!) as number[][];
    jobs.forEach((job, i) => job.wall.push(...walls[i]!));
    global.gc?.();
    const after = process.memoryUsage();
    const relayRss = rssKb(jobs[0]!.relay.pid!);
    // Baseline: the same requests straight at the backend, 64 jobs at a time, each job's calls in order.
    const direct: number[] = [];
    await Promise.all(
      jobs.map(async (job) => {
        for (const rec of job.session.recorded) {
          const t0 = performance.now();
          await complete(url, rec.body);
          direct.push(performance.now() - t0);
        }
      }),
    );
    const wall = jobs.flatMap((j) => j.wall);
    const inside = jobs.flatMap((j) => j.session.recorded.map((r) => r.ms));
    const added = jobs.flatMap((j) => j.wall.map((w, i) => w - j.session.recorded[i]!.ms));
    // The gateway's own work around the backend call, and what the relay and HTTP add on top.
    const own = jobs.flatMap((j) => j.gateway.spent.map((c, i) => c - j.session.recorded[i]!.ms));
    const transport = jobs.flatMap((j) => j.wall.map((w, i) => w - j.gateway.spent[i]!));
    const reused = jobs.reduce((n, j) => n + j.gateway.calls.reduce((m, c) => m + c.reused_tokens, 0), 0);
    const prompt = jobs.reduce((n, j) => n + j.gateway.calls.reduce((m, c) => m + c.prompt_tokens, 0), 0);
    const perJobKb =
      (after.heapUsed + after.external + after.arrayBuffers - before.heapUsed - before.external - before.arrayBuffers) / 1024 / JOBS;
    const out = {
      jobs: JOBS,
      turns: TURNS,
      calls: wall.length,
      load_avg_1m: load[0],
      cores: os.cpus().length,
      gateway_ms: { p50: q(wall, 0.5), p99: q(wall, 0.99) },
      inside_backend_ms: { p50: q(inside, 0.5), p99: q(inside, 0.99) },
      direct_ms: { p50: q(direct, 0.5), p99: q(direct, 0.99) },
      added_ms: { p50: q(added, 0.5), p99: q(added, 0.99), floor: 0 },
      gateway_own_ms: { p50: q(own, 0.5), p99: q(own, 0.99) },
      relay_and_http_ms: { p50: q(transport, 0.5), p99: q(transport, 0.99) },
      ratio_gateway_over_direct_p50: q(wall, 0.5) / q(direct, 0.5),
      reused_prompt_tokens_fraction: reused / prompt,
      retokenized_tokens: jobs.reduce((n, j) => n + j.gateway.retokenized, 0),
      host_memory_per_job_kb: Math.round(perJobKb),
      relay_rss_kb: relayRss,
    };
    const f = (x: { p50: number; p99: number }): string => `p50 ${x.p50.toFixed(2)} ms  p99 ${x.p99.toFixed(2)} ms`;
    process.stdout.write(
      [
        `bench:gateway  ${JOBS} jobs × ${TURNS} turns = ${wall.length} calls; load avg ${load[0]!.toFixed(2)} on ${os.cpus().length} cores`,
        `  through the gateway (harness wall time)   ${f(out.gateway_ms)}`,
        `  its backend call (inside the gateway)     ${f(out.inside_backend_ms)}`,
        `  same requests, direct to the backend      ${f(out.direct_ms)}`,
        `  added by the gateway (paired, floor 0)    ${f(out.added_ms)}`,
        `    of which the gateway's own work          ${f(out.gateway_own_ms)}`,
        `    of which relay, socket and HTTP          ${f(out.relay_and_http_ms)}`,
        `  ratio gateway / direct (p50)              ${out.ratio_gateway_over_direct_p50.toFixed(2)}`,
        `  prompt ids reused, not tokenised          ${(100 * out.reused_prompt_tokens_fraction).toFixed(1)} %  (re-tokenised: ${out.retokenized_tokens})`,
        `  memory per job: gateway host ${out.host_memory_per_job_kb} KiB; relay process RSS ${(relayRss / 1024).toFixed(1)} MiB`,
        '',
      ].join('\n'),
    );
    if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify(out)}\n`);
    for (const j of jobs) j.relay.stdin!.end();
    await host.close();
  } finally {
    for (const c of children) c.kill();
  }
}

/** The harnesses' side: reads [{j, base}] on stdin, holds every conversation at once, prints each job's call times. */
async function drive(turns: number): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const jobs = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Array<{ j: number; base: string }>;
  const walls = await Promise.all(
    jobs.map(async (job) => {
      const wall: number[] = [];
      const messages: Array<Record<string, unknown>> = [
        { role: 'system', content: 'You are a helpful assistant in a benchmark.' },
        { role: 'user', content: `Task ${job.j}: tell me about the sea, one sentence at a time.` },
      ];
      for (let t = 0; t < turns; t++) {
        const t0 = performance.now();
        const r = await fetch(`${job.base}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages }),
        });
        const a = (await r.json()) as { choices: Array<{ message: Record<string, unknown> }> };
        wall.push(performance.now() - t0);
        messages.push(a.choices[0]!.message, { role: 'user', content: `Continue (${t}).` });
      }
      return wall;
    }),
  );
  process.stdout.write(`${JSON.stringify(walls)}\n`);
}

const driverAt = process.argv.indexOf('--driver');
(driverAt >= 0 ? drive(Number(process.argv[driverAt + 1])) : main()).catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
