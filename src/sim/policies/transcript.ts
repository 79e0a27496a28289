/**
 * Reads a decoded ChatML prompt (Qwen-style `<|im_start|>role\n…<|im_end|>`) back into what a
 * scripted policy needs: the first user message, the earlier assistant turns with their tool calls,
 * the latest tool responses, and whether thinking is on.
 */

export interface PolicyCall {
  name: string;
  arguments: Record<string, unknown>;
}

export interface Transcript {
  /** Content of the first user message (where the task is stated). */
  firstUser: string | undefined;
  /** Earlier assistant turns, oldest first: their text and parsed tool calls. */
  assistant: Array<{ text: string; calls: PolicyCall[] }>;
  /** Contents of the `<tool_response>` blocks after the last assistant turn. */
  toolResponses: string[];
  /** False when the generation prompt already holds the empty think block (enable_thinking off). */
  thinking: boolean;
}

const START = '<|im_start|>';
const END = '<|im_end|>';

/** Parses a decoded prompt; an unrecognised format gives firstUser undefined. */
export function parseTranscript(prompt: string): Transcript {
  const parts = prompt.split(START).slice(1);
  const out: Transcript = { firstUser: undefined, assistant: [], toolResponses: [], thinking: true };
  if (parts.length === 0) return out;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const nl = part.indexOf('\n');
    const role = nl < 0 ? part : part.slice(0, nl);
    const endAt = part.indexOf(END);
    const content = part.slice(nl + 1, endAt < 0 ? undefined : endAt);
    const last = i === parts.length - 1;
    if (last && role === 'assistant' && endAt < 0) {
      out.thinking = !/^<think>\s*<\/think>/.test(content);
      continue;
    }
    if (role === 'user') {
      if (out.firstUser === undefined && !content.startsWith('<tool_response>')) out.firstUser = content;
      const responses = [...content.matchAll(/<tool_response>\n?([\s\S]*?)\n?<\/tool_response>/g)].map((m) => m[1]!);
      if (responses.length > 0) out.toolResponses = responses;
    } else if (role === 'assistant') {
      out.assistant.push({ text: content, calls: parseCalls(content) });
      out.toolResponses = [];
    }
  }
  return out;
}

/** Tool calls in an assistant text (`<tool_call>{json}</tool_call>`); malformed ones are skipped. */
export function parseCalls(text: string): PolicyCall[] {
  const calls: PolicyCall[] = [];
  for (const m of text.matchAll(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g)) {
    try {
      const v = JSON.parse(m[1]!) as { name?: unknown; arguments?: unknown };
      if (typeof v.name === 'string')
        calls.push({
          name: v.name,
          arguments: v.arguments && typeof v.arguments === 'object' ? (v.arguments as Record<string, unknown>) : {},
        });
    } catch {
      // a malformed call does not match any plan step
    }
  }
  return calls;
}

/** Renders one tool call the way Qwen3 emits it. */
export function renderCall(call: PolicyCall): string {
  return `<tool_call>\n${JSON.stringify({ name: call.name, arguments: call.arguments })}\n</tool_call>`;
}
