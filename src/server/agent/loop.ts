import { ContextLengthError, RaasError, cancellationKind } from '../../protocol/errors.js';
import type { FinishReason, Message, ToolCall } from '../../protocol/process.js';
import type { ChatMessage, Chunk } from '../../tokens/tokenizer.js';
import { parseToolCalls } from './parse.js';
import { TrajectoryBuilder } from './trajectory.js';
import type { AgentOptions, AgentTrajectory, AgentTurn, AgentTurnPart } from './types.js';

/** The name an unparseable tool call is listed under in the assistant message's tool_calls. */
const INVALID_TOOL_CALL = 'invalid_tool_call';

/** Defaults when neither sampling_params nor the handler say otherwise. */
const AGENT_DEFAULTS = { max_iterations: 30, max_tokens_per_turn: 1024 } as const;

// A backend that keeps aborting a turn without producing anything is broken, not updating weights.
const MAX_IDLE_ABORTS = 8;

interface TurnOutput {
  ids: number[];
  logprobs: number[];
  parts: AgentTurnPart[];
}

/**
 * The token-level agent loop: renders the first prompt once, then only appends. Each model
 * turn's ids go in unchanged; tool calls are parsed from its text and run; the tool results are
 * tokenised alone (with the template's generation prompt) and appended. Stops at `finish`,
 * max_iterations, max_response_tokens or max_model_len; on cancellation it resolves with the
 * trajectory so far.
 */
export async function runAgent(opts: AgentOptions): Promise<AgentTrajectory> {
  const { llm, tokenizer: tok, samplingParams: sp, signal } = opts;
  const enableThinking = sp.enable_thinking ?? true;
  const maxIterations = sp.max_iterations ?? opts.defaults?.max_iterations ?? AGENT_DEFAULTS.max_iterations;
  const perTurn =
    sp.max_tokens_per_turn ?? sp.max_output_tokens ?? opts.defaults?.max_tokens_per_turn ?? AGENT_DEFAULTS.max_tokens_per_turn;
  const responseBudget = sp.max_response_tokens ?? opts.defaults?.max_response_tokens ?? Number.POSITIVE_INFINITY;
  const stopIds = sp.stop_token_ids ?? [...tok.stopIds];
  const withInputIds = sp.token_level_generation === true || sp.return_message_ids === true;

  // Long texts (a problem statement, a tool's flood of output) are encoded off the event loop when
  // the server runs a tokenizer pool.
  const encode = (chunks: Chunk[]): Promise<number[]> =>
    tok.encodeChunksAsync ? tok.encodeChunksAsync(chunks, signal) : Promise.resolve(tok.encodeChunks(chunks));
  const traj = new TrajectoryBuilder(
    opts.promptIds ? [...opts.promptIds] : await encode(tok.promptChunks(opts.messages, { tools: opts.tools, enableThinking })),
  );
  for (const m of opts.messages) traj.addPromptMessage(toMessage(m));
  const turns: AgentTurn[] = [];
  let generated = 0;
  let finishReason: FinishReason | undefined;
  let final: Record<string, unknown> | undefined;
  let lastText = '';
  let malformed = 0;
  let callSeq = 0;
  let pending: TurnOutput | undefined; // a turn in progress, kept if cancellation cuts it

  const recordTurn = (t: TurnOutput, inputIds: number[] | undefined): { text: string; endedWithEos: boolean } => {
    const endedWithEos = t.ids.length > 0 && t.ids[t.ids.length - 1] === tok.eosId;
    const text = tok.decode(endedWithEos ? t.ids.slice(0, -1) : t.ids);
    const msg: Message = { role: 'assistant', content: text, token_ids: t.ids, logprobs: t.logprobs };
    if (inputIds) msg.input_ids = inputIds;
    traj.addModelTurn(msg, t.ids, t.logprobs);
    const first = t.parts[0];
    turns.push({ backend: first?.backend ?? llm.backend ?? '', weight_version: first?.weight_version ?? '', parts: t.parts });
    generated += t.ids.length;
    lastText = text;
    return { text, endedWithEos };
  };

  try {
    const maxModelLen = sp.max_model_len ?? (await llm.maxModelLen(signal)) ?? Number.POSITIVE_INFINITY;
    for (;;) {
      signal.throwIfAborted();
      if (turns.length >= maxIterations) {
        finishReason = 'max_iterations';
        break;
      }
      const responseLeft = responseBudget - generated;
      if (responseLeft <= 0) {
        finishReason = 'max_response_tokens';
        break;
      }
      const contextLeft = maxModelLen - traj.length;
      if (contextLeft <= 0) {
        finishReason = 'max_model_len';
        break;
      }
      const budget = Math.min(perTurn, responseLeft, contextLeft);
      const prompt = traj.sequence();
      pending = { ids: [], logprobs: [], parts: [] };
      try {
        await generateTurn(opts, prompt, budget, stopIds, pending);
      } catch (err) {
        if (err instanceof ContextLengthError && !signal.aborted) {
          // The backend's window is smaller than we were told: a normal finish, not a failure.
          if (pending.ids.length > 0) recordTurn(pending, withInputIds ? prompt : undefined);
          pending = undefined;
          finishReason = 'max_model_len';
          break;
        }
        throw err;
      }
      const turn = pending;
      pending = undefined;
      const { text, endedWithEos } = recordTurn(turn, withInputIds ? prompt : undefined);

      // Tools run even when this is the last turn: their side effects (edits) count for EVAL.
      const turnIndex = turns.length - 1;
      const results: Message[] = [];
      const calls: ToolCall[] = [];
      let finished = false;
      const parsed = parseToolCalls(text);
      for (const p of parsed) {
        // Ids as NeMo-Gym numbers tool calls (call_1, call_2, … over the whole rollout), so its
        // converter pairs each output with its call; an unparseable call is listed too, so the
        // outputs stay one per listed call in order.
        const id = `call_${++callSeq}`;
        if ('error' in p) {
          malformed++;
          calls.push({ name: INVALID_TOOL_CALL, arguments: { error: p.error }, id });
          results.push({
            role: 'tool',
            content: `ERROR: could not run this tool call: ${p.error}. Write each call as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>.`,
            tool_call_id: id,
          });
          continue;
        }
        calls.push({ name: p.call.name, arguments: p.call.arguments, id });
        let observation: string;
        try {
          const outcome = await opts.execute(p.call, signal);
          observation = outcome.observation;
          if (outcome.finish) {
            finished = true;
            final = p.call.arguments;
          }
        } catch (err) {
          // A sandbox limit (a full workspace, an over-size read) ends the rollout, naming the limit.
          if (signal.aborted || (err instanceof RaasError && err.code === 'sandbox_limit')) throw err;
          observation = `ERROR: ${err instanceof Error ? err.message : String(err)}`;
        }
        results.push({ role: 'tool', content: observation, tool_call_id: id });
        if (finished) break;
      }
      if (calls.length > 0) traj.messages[traj.messages.length - 1]!.tool_calls = calls;
      if (finished) {
        traj.addUnsent(results);
        finishReason = 'finish';
        break;
      }
      let next: Message[] = results;
      if (parsed.length === 0) {
        // A turn cut by a limit is that limit's finish, not the model's own.
        const limit = endedWithEos
          ? undefined
          : generated >= responseBudget
            ? 'max_response_tokens'
            : traj.length >= maxModelLen
              ? 'max_model_len'
              : undefined;
        if (limit) {
          finishReason = limit;
          break;
        }
        const user = opts.onNoToolCall?.(text, turnIndex);
        if (user === undefined) {
          finishReason = 'finish';
          break;
        }
        next = [{ role: 'user', content: user }];
      }

      // The observation: the template's end-of-turn for a turn that did not end with eos, the
      // messages as the template renders them, and the generation prompt.
      const obs = await encode(
        tok.observationChunks(
          next.map((m) => ({ role: m.role, content: m.content })),
          { enableThinking },
        ),
      );
      const ids = endedWithEos ? obs : [tok.eosId, ...obs];
      const stop =
        turns.length >= maxIterations
          ? 'max_iterations'
          : generated >= responseBudget
            ? 'max_response_tokens'
            : traj.length + ids.length >= maxModelLen
              ? 'max_model_len'
              : undefined;
      if (stop) {
        traj.addUnsent(next);
        finishReason = stop;
        break;
      }
      traj.addObservation(next, ids, messageCuts(ids, next.length, tok.encode('<tool_response>')));
    }
  } catch (err) {
    if (!signal.aborted) throw err;
    if (pending && pending.ids.length > 0) recordTurn(pending, undefined);
    finishReason = cancellationKind(signal.reason) === 'timeout' ? 'timeout' : 'cancelled';
  }
  return {
    messages: traj.messages,
    tokens: traj.tokens(),
    finish_reason: finishReason ?? 'error',
    num_turns: turns.length,
    final,
    last_text: lastText,
    turns,
    weight_versions: turns.map((t) => t.weight_version),
    malformed_tool_calls: malformed,
  };
}

/**
 * One model turn. A call the backend aborts (a weight update in abort mode) is continued: the prompt
 * plus the ids so far is re-sent with max_tokens reduced by what was generated; each part records
 * its backend and weight version.
 */
async function generateTurn(opts: AgentOptions, prompt: number[], budget: number, stopIds: number[], out: TurnOutput): Promise<void> {
  let idle = 0;
  for (;;) {
    const res = await opts.llm.generate({
      prompt_ids: out.ids.length === 0 ? prompt : prompt.concat(out.ids),
      max_tokens: budget - out.ids.length,
      stop_token_ids: stopIds,
      signal: opts.signal,
    });
    out.ids.push(...res.ids);
    out.logprobs.push(...res.logprobs);
    out.parts.push({ backend: res.backend, weight_version: res.weight_version, tokens: res.ids.length, finish_reason: res.finish_reason });
    if (res.finish_reason !== 'abort' || out.ids.length >= budget) return;
    if (res.ids.length > 0 && stopIds.includes(res.ids[res.ids.length - 1]!)) return;
    idle = res.ids.length === 0 ? idle + 1 : 0;
    if (idle > MAX_IDLE_ABORTS)
      throw new RaasError(
        'backend_unavailable',
        `backend ${res.backend} aborted the turn ${idle} times in a row without generating anything`,
      );
  }
}

/** Where each message after the first begins in a multi-message observation (Qwen3: at each `<tool_response>`). */
function messageCuts(ids: readonly number[], count: number, marker: number[]): number[] | undefined {
  if (count < 2 || marker.length !== 1) return undefined;
  const at: number[] = [];
  ids.forEach((id, i) => {
    if (id === marker[0]) at.push(i);
  });
  return at.length === count ? at.slice(1) : undefined;
}

function toMessage(m: ChatMessage): Message {
  const out: Message = { role: m.role, content: m.content };
  if (m.tool_calls) out.tool_calls = m.tool_calls.map((c) => ({ name: c.name, arguments: c.arguments }));
  return out;
}
