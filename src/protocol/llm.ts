import { z } from 'zod';

export const LlmApi = z.enum(['vllm', 'sglang']);
export type LlmApi = z.infer<typeof LlmApi>;

/** POST /add_llm_server body. ProRL's `http://host:port/v1` addresses are vLLM. */
export const AddLlmServerRequest = z.strictObject({
  address: z.string().min(1).max(2048),
  api: LlmApi.optional(),
  weight_version: z.string().max(256).optional(),
});
export type AddLlmServerRequest = z.infer<typeof AddLlmServerRequest>;

export const RemoveLlmServerRequest = z.strictObject({ address: z.string().min(1).max(2048) });

/** A backend as /status and the llm routes report it. */
export const BackendInfo = z.object({
  address: z.string(),
  api: LlmApi,
  weight_version: z.string(),
  active: z.number().int(),
  assigned: z.number().int(),
  healthy: z.boolean().optional(),
});
export type BackendInfo = z.infer<typeof BackendInfo>;

export const LlmServersResponse = z.object({ status: z.string(), backends: z.array(BackendInfo) });
export type LlmServersResponse = z.infer<typeof LlmServersResponse>;
