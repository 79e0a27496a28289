import type { BackendProbe, LlmApi } from '../../protocol/llm.js';
import { getJson, normalizeAddress } from './http.js';

/**
 * Asks a backend once what it serves, for POST /add_llm_server's answer: vLLM `GET /v1/models` (id,
 * max_model_len), SGLang `GET /get_model_info` (model_path) and `GET /get_server_info`
 * (context_length). Never throws: a backend that does not answer gets a warning (it stays
 * registered; the health probes take over).
 */
export async function probeBackend(address: string, api: LlmApi, timeoutMs: number, signal?: AbortSignal): Promise<BackendProbe> {
  const base = normalizeAddress(address);
  try {
    if (api === 'vllm') {
      const r = (await getJson(`${base}/v1/models`, signal, timeoutMs)) as {
        data?: Array<{ id?: unknown; max_model_len?: unknown }>;
      } | null;
      const m = r?.data?.[0];
      if (!m) return { answered: true, warning: `${base}/v1/models listed no model: is this a vLLM server?` };
      return { answered: true, ...fields(m.id, m.max_model_len) };
    }
    const [info, server] = await Promise.all([
      getJson(`${base}/get_model_info`, signal, timeoutMs) as Promise<{ model_path?: unknown } | null>,
      (getJson(`${base}/get_server_info`, signal, timeoutMs) as Promise<{ context_length?: unknown } | null>).catch(() => null),
    ]);
    return { answered: true, ...fields(info?.model_path, server?.context_length) };
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    const other = api === 'vllm' ? 'sglang' : 'vllm';
    const hint = /answered 404/.test(why)
      ? ` (is it a ${other === 'sglang' ? 'SGLang' : 'vLLM'} server? register it with "api": "${other}")`
      : '';
    return {
      answered: false,
      warning: `the backend did not answer the model probe: ${why}${hint}; it is registered anyway and the health probes decide when it gets work`,
    };
  }
}

function fields(model: unknown, maxLen: unknown): Pick<BackendProbe, 'model' | 'max_model_len'> {
  return {
    ...(typeof model === 'string' ? { model } : {}),
    ...(typeof maxLen === 'number' && Number.isInteger(maxLen) ? { max_model_len: maxLen } : {}),
  };
}
