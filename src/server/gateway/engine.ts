import { RaasError } from '../../protocol/errors.js';
import type { SamplingParams } from '../../protocol/process.js';
import type { Chunk, Tokenizer } from '../../tokens/tokenizer.js';
import { exceedsTokens } from '../../tokens/bounds.js';
import type { LlmSession } from '../llm/types.js';
import { canonicalJson, toChatMessage, type AskedSampling, type GwAnswer, type GwMessage, type GwRequest } from './conversation.js';
import { recordedAsked } from './limits.js';
import { renderKey, SegmentBook, type Segment, type SegmentPlan } from './segments.js';
import { splitReasoning, type ToolCallParser } from './tool-parsers.js';

// A backend that keeps aborting a call without producing anything is broken, not updating weights.
const MAX_IDLE_ABORTS = 8;

/** Options of one job's gateway. */
export interface JobGatewayOptions {
  llm: LlmSession;
  tokenizer: Tokenizer;
  /** The trainer's sampling_params: they win over what a harness asks for. */
  sampling: SamplingParams;
  parser: ToolCallParser;
  /** Cap of one call when sampling_params sets none (`handlers.harness.max_tokens_per_turn`). */
  maxTokensPerTurn: number;
  /** Zero-based numbering of tool-call ids (`call_1`, …) continues from here. */
  callIdStart?: number;
  /** Segments the job keeps; a call that would open one more is refused (`handlers.harness.max_segments`). */
  maxSegments?: number;
}

/** One call as the job's record keeps it. */
export interface GatewayCall {
  api: GwRequest['api'];
  segment: number;
  /** How the request related to what the job held. */
  kind: 'extend' | 'branch' | 'fresh';
  prompt_tokens: number;
  /** Prompt ids taken from earlier calls instead of being tokenised. */
  reused_tokens: number;
  completion_tokens: number;
  finish: GwAnswer['finish'];
  backend: string;
  weight_version: string;
  /** What the harness asked for (sampling_params won where they set a value). */
  asked: AskedSampling;
  /** The max_tokens the backend was given. */
  max_tokens: number;
}

/** A call refused because the job ended (the gateway closed). */
class GatewayClosedError extends RaasError {
  constructor() {
    super('gateway_closed', 'this job has ended: its gateway takes no more calls', { retryable: false, status: 409 });
  }
}

/**
 * One job's model endpoint behind every API the gateway speaks. It places each request among the
 * job's segments (extend, branch, or fresh), builds the prompt from ids it already holds plus the
 * tokenised new messages, calls the job's LLM session (so routing, affinity, health, pause and
 * weight versions stay the pipeline's), and parses the answer's reasoning and tool calls.
 */
export class JobGateway {
  readonly book = new SegmentBook();
  readonly calls: GatewayCall[] = [];
  /** Tokens of earlier model turns that a rewritten history made the gateway encode from text. */
  retokenized = 0;
  invalidToolCalls = 0;
  /** The length limit a refused call hit (the harness then usually ends): the rollout's finish_reason. */
  limit: 'max_response_tokens' | 'max_model_len' | undefined;
  private generatedTotal = 0;
  /** max_tokens of the calls generating now: concurrent calls share what is left of max_response_tokens. */
  private reserved = 0;
  private callSeq: number;
  private closed = false;
  /** Signatures of every model turn generated, to tell re-tokenised output from a harness's own text. */
  private readonly sampled = new Set<string>();
  private readonly enableThinking: boolean;

  constructor(private readonly o: JobGatewayOptions) {
    this.callSeq = o.callIdStart ?? 0;
    this.enableThinking = o.sampling.enable_thinking ?? true;
  }

  get tokenizer(): Tokenizer {
    return this.o.tokenizer;
  }

  /** Refuses every later call (the job ended). */
  close(): void {
    this.closed = true;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Model-generated tokens over all segments. */
  get generated(): number {
    return this.generatedTotal;
  }

  async complete(req: GwRequest, signal: AbortSignal): Promise<GwAnswer> {
    if (this.closed) throw new GatewayClosedError();
    signal.throwIfAborted();
    const key = renderKey(req.tools, this.enableThinking);
    const plan = this.book.plan(req.messages, key);
    const cap = this.o.maxSegments ?? Number.POSITIVE_INFINITY;
    if (plan.kind !== 'extend' && this.book.segments.length >= cap)
      throw new RaasError(
        'bad_request',
        `this job holds ${this.book.segments.length} conversations, its most (handlers.harness.max_segments): continue one of them`,
        { retryable: false },
      );
    // Held from planning to commit: a concurrent request on this segment branches instead.
    if (plan.kind === 'extend') plan.segment.busy = true;
    try {
      return await this.run(req, plan, key, signal);
    } catch (err) {
      if (err instanceof RaasError && err.code === 'context_length_exceeded')
        this.limit = err.message.includes('max_response_tokens') ? 'max_response_tokens' : 'max_model_len';
      throw err;
    } finally {
      if (plan.kind === 'extend') plan.segment.busy = false;
    }
  }

  private async run(req: GwRequest, plan: SegmentPlan, key: string, signal: AbortSignal): Promise<GwAnswer> {
    const tok = this.o.tokenizer;
    let prefix: number[];
    let obs: number[];
    if (plan.kind === 'fresh') {
      prefix = [];
      const chunks = tok.promptChunks(plan.messages.map(toChatMessage), { tools: req.tools, enableThinking: this.enableThinking });
      await this.refuseIfTooLong(chunks, 0, signal);
      obs = await this.encode(chunks, signal);
    } else {
      const base = plan.kind === 'extend' ? plan.segment : plan.from;
      prefix = plan.kind === 'extend' ? base.sequence() : base.sequence().slice(0, plan.cut);
      const closing = plan.kind === 'extend' ? !base.endedWithEos : prefix[prefix.length - 1] !== tok.eosId;
      const chunks = tok.observationChunks(plan.added.map(toChatMessage), { enableThinking: this.enableThinking });
      await this.refuseIfTooLong(chunks, prefix.length, signal);
      const rendered = await this.encode(chunks, signal);
      obs = closing ? [tok.eosId, ...rendered] : rendered;
    }
    if (this.closed) throw new GatewayClosedError();
    const prompt = prefix.concat(obs);
    const maxTokens = this.maxTokens(req.asked);
    this.reserved += maxTokens;
    let out: Awaited<ReturnType<JobGateway['generate']>>;
    try {
      out = await this.generate(prompt, maxTokens, signal);
    } finally {
      // Released in the same tick as generatedTotal grows (below): the budget is never counted twice or not at all.
      this.reserved -= maxTokens;
    }
    if (this.closed) throw new GatewayClosedError();

    // The answer, as the harness will see it.
    const endedWithEos = out.ids.length > 0 && out.ids[out.ids.length - 1] === tok.eosId;
    const text = tok.decode(endedWithEos ? out.ids.slice(0, -1) : out.ids);
    const { reasoning, content: visible } = splitReasoning(text);
    const parsed =
      req.toolChoice === 'none' || req.tools.length === 0
        ? { content: visible, calls: [], invalid: 0 }
        : this.o.parser.parse(visible, req.tools);
    this.invalidToolCalls += parsed.invalid;
    const toolCalls = parsed.calls.map((c) => ({ id: `call_${++this.callSeq}`, name: c.name, arguments: c.arguments }));
    const assistant: GwMessage = { role: 'assistant', content: parsed.content, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) };
    this.sampled.add(signature(assistant));

    // Commit: the segment gets the observation (mask 0), then the generated ids (mask 1).
    let seg: Segment;
    if (plan.kind === 'extend') {
      seg = plan.segment;
      seg.append(obs, 0);
      seg.messages.push(...plan.added);
      for (const _ of plan.added) seg.cuts.push(undefined);
    } else if (plan.kind === 'fresh') {
      seg = this.book.open(key, obs, null);
      seg.messages.push(...plan.messages);
      for (const _ of plan.messages) seg.cuts.push(undefined);
    } else {
      const from = plan.from;
      const keep = plan.keep;
      seg = this.book.open(key, prompt, { segment: from.index, shared: prefix.length });
      seg.messages.push(...from.messages.slice(0, keep), ...plan.added);
      seg.cuts.push(...from.cuts.slice(0, keep), ...plan.added.map(() => undefined));
    }
    if (plan.kind === 'fresh') this.retokenized += this.retokenizedIn(plan.messages);
    seg.append(out.ids, 1, out.logprobs);
    seg.messages.push(assistant);
    seg.cuts.push(seg.length);
    seg.endedWithEos = endedWithEos;
    seg.weight_versions.push(out.weight_version);
    this.generatedTotal += out.ids.length;

    const finish = toolCalls.length > 0 ? 'tool_calls' : out.finish === 'length' && !endedWithEos ? 'length' : 'stop';
    this.calls.push({
      api: req.api,
      segment: seg.index,
      kind: plan.kind,
      prompt_tokens: prompt.length,
      reused_tokens: prefix.length,
      completion_tokens: out.ids.length,
      finish,
      backend: out.backend,
      weight_version: out.weight_version,
      asked: recordedAsked(req.asked),
      max_tokens: maxTokens,
    });
    return {
      text: parsed.content,
      ...(reasoning !== undefined ? { reasoning } : {}),
      toolCalls,
      finish,
      usage: { prompt_tokens: prompt.length, completion_tokens: out.ids.length, cached_tokens: prefix.length },
      segment: seg.index,
    };
  }

  /**
   * max_tokens of one call: the trainer's per-turn cap (else the handler's default), lowered by
   * what the harness asked for and by what is left of max_response_tokens. The session clamps it
   * further to the context window.
   */
  private maxTokens(asked: AskedSampling): number {
    const sp = this.o.sampling;
    const cap = sp.max_tokens_per_turn ?? sp.max_output_tokens ?? this.o.maxTokensPerTurn;
    const left = (sp.max_response_tokens ?? Number.POSITIVE_INFINITY) - this.generatedTotal - this.reserved;
    if (left <= 0)
      throw new RaasError(
        'context_length_exceeded',
        `this job's response-token budget (sampling_params.max_response_tokens = ${sp.max_response_tokens}) is spent${this.reserved > 0 ? ' or held by calls in flight' : ''}`,
        { retryable: false },
      );
    return Math.max(1, Math.min(cap, asked.max_tokens ?? Number.POSITIVE_INFINITY, left));
  }

  /** One model turn; a call the backend aborts (a weight update) is continued with the ids so far. */
  private async generate(prompt: number[], budget: number, signal: AbortSignal) {
    const ids: number[] = [];
    const logprobs: number[] = [];
    const stop = this.o.sampling.stop_token_ids ?? [...this.o.tokenizer.stopIds];
    let idle = 0;
    let first: { backend: string; weight_version: string } | undefined;
    for (;;) {
      const r = await this.o.llm.generate({
        prompt_ids: ids.length === 0 ? prompt : prompt.concat(ids),
        max_tokens: budget - ids.length,
        stop_token_ids: stop,
        signal,
      });
      first ??= { backend: r.backend, weight_version: r.weight_version };
      ids.push(...r.ids);
      logprobs.push(...r.logprobs);
      if (r.finish_reason !== 'abort' || ids.length >= budget) return { ids, logprobs, finish: r.finish_reason, ...first };
      if (r.ids.length > 0 && stop.includes(r.ids[r.ids.length - 1]!)) return { ids, logprobs, finish: 'stop' as const, ...first };
      idle = r.ids.length === 0 ? idle + 1 : 0;
      if (idle > MAX_IDLE_ABORTS)
        throw new RaasError(
          'backend_unavailable',
          `backend ${r.backend} aborted the call ${idle} times in a row without generating anything`,
        );
    }
  }

  /**
   * Refuses a request that cannot fit the context window before it is tokenised: a huge message
   * (no window holds 30 MB) would otherwise keep a worker of the server's shared tokenizer pool busy
   * for minutes. The bound is a lower bound of the tokens (exceedsTokens), so nothing that fits is refused.
   */
  private async refuseIfTooLong(chunks: Chunk[], prefixLen: number, signal: AbortSignal): Promise<void> {
    const window = await this.o.llm.maxModelLen(signal);
    if (window === undefined) return;
    if (exceedsTokens(this.o.tokenizer, chunks, window - prefixLen))
      throw new RaasError(
        'context_length_exceeded',
        `the new messages hold more text than the model's context has room for (max_model_len ${window}, ${prefixLen} tokens already in this conversation): send less text`,
        { retryable: false },
      );
  }

  private encode(chunks: Chunk[], signal: AbortSignal): Promise<number[]> {
    const tok = this.o.tokenizer;
    return tok.encodeChunksAsync ? tok.encodeChunksAsync(chunks, signal) : Promise.resolve(tok.encodeChunks(chunks));
  }

  /** Tokens of the model turns in a freshly rendered request that this job generated earlier. */
  private retokenizedIn(messages: readonly GwMessage[]): number {
    let n = 0;
    for (const m of messages) {
      if (m.role !== 'assistant' || !this.sampled.has(signature(m))) continue;
      n += this.o.tokenizer.encodePlain(m.content).length;
      for (const c of m.tool_calls ?? [])
        n += this.o.tokenizer.encodePlain(JSON.stringify({ name: c.name, arguments: c.arguments })).length;
    }
    return n;
  }
}

function signature(m: GwMessage): string {
  const end = m.content.lastIndexOf('</think>');
  const visible = (end >= 0 ? m.content.slice(end + 8) : m.content).trim();
  return `${visible}\u0000${canonicalJson((m.tool_calls ?? []).map((c) => [c.name, c.arguments]))}`;
}
