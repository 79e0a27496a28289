import { z } from 'zod';

/**
 * Request bodies the agent gateway accepts, as loose schemas: harnesses send many fields we do not
 * read (metadata, store, parallel_tool_calls, …); only the fields read here are checked.
 * Shapes follow the official SDKs' types: openai-node v6.49.0 (04671d2) src/resources/chat/completions,
 * src/resources/responses; anthropic-sdk-typescript sdk-v0.71.2 (eb8b090) src/resources/messages.
 */

const Stop = z.union([z.string(), z.array(z.string())]).nullish();
const MaxTokens = z.number().int().positive().nullish();
const Temperature = z.number().min(0).max(2).nullish();
const TopP = z.number().min(0).max(1).nullish();

/**
 * Per-request caps, checked before the items are (zod stops at a too-long array): the chat template
 * renders tools and messages on the server's event loop, so their number is bounded. Tool
 * definitions are also bounded in size by the gateway (src/server/gateway/limits.ts).
 */
const MAX_TOOLS = 1024;
const MAX_MESSAGES = 16_384;
const tooMany = (what: string, n: number) => ({ error: `at most ${n} ${what} per request` });

/** One function tool of the chat completions API. */
const ChatTool = z.looseObject({
  type: z.string(),
  function: z.looseObject({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
  }),
});

/** One message of the chat completions API (content a string, null, or a list of parts). */
const ChatMessage = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.unknown().optional(),
  name: z.string().nullish(),
  tool_call_id: z.string().nullish(),
  reasoning_content: z.string().nullish(),
  tool_calls: z
    .array(
      z.looseObject({
        id: z.string().nullish(),
        type: z.string().nullish(),
        function: z.looseObject({ name: z.string(), arguments: z.unknown().optional() }),
      }),
    )
    .nullish(),
});

/** POST /v1/chat/completions. */
export const ChatCompletionRequest = z.looseObject({
  model: z.string(),
  messages: z.array(ChatMessage).min(1).max(MAX_MESSAGES, tooMany('messages', MAX_MESSAGES)),
  tools: z.array(ChatTool).max(MAX_TOOLS, tooMany('tools', MAX_TOOLS)).nullish(),
  tool_choice: z.unknown().optional(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: MaxTokens,
  max_completion_tokens: MaxTokens,
  temperature: Temperature,
  top_p: TopP,
  stop: Stop,
  n: z.literal(1, { error: 'n must be 1: the gateway samples one completion per call' }).nullish(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

/** One item of a Responses API `input` list. */
const ResponseItem = z.looseObject({
  type: z.string().optional(),
  role: z.string().optional(),
  content: z.unknown().optional(),
  call_id: z.string().optional(),
  name: z.string().optional(),
  arguments: z.string().optional(),
  output: z.unknown().optional(),
});

/** POST /v1/responses. */
export const ResponsesRequest = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(ResponseItem).max(MAX_MESSAGES, tooMany('input items', MAX_MESSAGES))]),
  instructions: z.string().nullish(),
  tools: z
    .array(
      z.looseObject({
        type: z.string(),
        name: z.string().optional(),
        description: z.string().nullish(),
        parameters: z.record(z.string(), z.unknown()).nullish(),
      }),
    )
    .max(MAX_TOOLS, tooMany('tools', MAX_TOOLS))
    .nullish(),
  tool_choice: z.unknown().optional(),
  stream: z.boolean().nullish(),
  max_output_tokens: MaxTokens,
  temperature: Temperature,
  top_p: TopP,
  previous_response_id: z.string().nullish(),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

/** One content block of an Anthropic message. */
const AnthropicBlock = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  id: z.string().optional(),
  name: z.string().optional(),
  input: z.unknown().optional(),
  tool_use_id: z.string().optional(),
  content: z.unknown().optional(),
  thinking: z.string().optional(),
});

/** POST /v1/messages (and /v1/messages/count_tokens, which takes the same body less max_tokens). */
export const MessagesRequest = z.looseObject({
  model: z.string(),
  max_tokens: z.number().int().positive().optional(),
  system: z.union([z.string(), z.array(AnthropicBlock)]).nullish(),
  // Claude Code 2.1 also sends `system` turns inside `messages` (its reminders).
  messages: z
    .array(z.looseObject({ role: z.enum(['user', 'assistant', 'system']), content: z.union([z.string(), z.array(AnthropicBlock)]) }))
    .max(MAX_MESSAGES, tooMany('messages', MAX_MESSAGES)),
  tools: z
    .array(
      z.looseObject({
        name: z.string().min(1),
        description: z.string().nullish(),
        input_schema: z.record(z.string(), z.unknown()).nullish(),
      }),
    )
    .max(MAX_TOOLS, tooMany('tools', MAX_TOOLS))
    .nullish(),
  tool_choice: z.unknown().optional(),
  stream: z.boolean().nullish(),
  temperature: z.number().min(0).max(1).nullish(),
  top_p: TopP,
  stop_sequences: z.array(z.string()).nullish(),
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;
