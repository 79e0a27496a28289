import type { Message, Span, Tokens } from '../../protocol/process.js';

/**
 * The growing token view of one trajectory: `prompt_ids ++ response_ids` is exactly the sequence the
 * backend saw, generated ids are appended unchanged (mask 1, their logprobs) and observation ids
 * after them (mask 0, logprob 0). Each message after the prompt gets its span of `response_ids`.
 */
export class TrajectoryBuilder {
  readonly messages: Message[] = [];
  readonly response_ids: number[] = [];
  readonly response_mask: Array<0 | 1> = [];
  readonly logprobs: number[] = [];
  readonly spans: Span[] = [];

  constructor(readonly prompt_ids: number[]) {}

  /** The whole sequence so far: the next call's prompt. */
  sequence(): number[] {
    return this.prompt_ids.concat(this.response_ids);
  }

  get length(): number {
    return this.prompt_ids.length + this.response_ids.length;
  }

  /** Adds a prompt message (system, user): part of `prompt_ids`, so no span. */
  addPromptMessage(m: Message): void {
    this.messages.push(m);
  }

  /** Appends a model turn's ids as generated, with its message. */
  addModelTurn(message: Message, ids: readonly number[], logprobs: readonly number[]): void {
    const start = this.response_ids.length;
    for (let i = 0; i < ids.length; i++) {
      this.response_ids.push(ids[i]!);
      this.response_mask.push(1);
      this.logprobs.push(logprobs[i] ?? 0);
    }
    this.spans.push({ message_index: this.messages.length, start, end: this.response_ids.length });
    this.messages.push(message);
  }

  /**
   * Appends observation ids for one or more messages (tool results, a user turn). `cuts` are the
   * offsets inside `ids` where each message after the first begins; without them the first message
   * takes the whole range and the others get empty spans at its end.
   */
  addObservation(messages: Message[], ids: readonly number[], cuts?: number[]): void {
    const base = this.response_ids.length;
    for (const id of ids) {
      this.response_ids.push(id);
      this.response_mask.push(0);
      this.logprobs.push(0);
    }
    const bounds =
      cuts && cuts.length === messages.length - 1 ? [0, ...cuts, ids.length] : [0, ids.length, ...messages.slice(1).map(() => ids.length)];
    messages.forEach((m, k) => {
      this.spans.push({ message_index: this.messages.length, start: base + bounds[k]!, end: base + bounds[k + 1]! });
      this.messages.push(m);
    });
  }

  /** Adds messages that never reached the model (tool results of the final turn): no span. */
  addUnsent(messages: Message[]): void {
    this.messages.push(...messages);
  }

  tokens(): Tokens {
    return {
      prompt_ids: this.prompt_ids,
      response_ids: this.response_ids,
      response_mask: this.response_mask,
      logprobs: this.logprobs,
      spans: this.spans,
    };
  }
}
