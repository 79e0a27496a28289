// NeMo-Gym's prorl_agent client, ported line by line to TypeScript so the suite reads raas's answers
// exactly as Gym reads ProRL's. Source: NVIDIA-NeMo/Gym at b785ff0 (refs/pull/1290/head), files
// responses_api_agents/prorl_agent/{app.py, run_prorl.py, utils.py}; each function names its lines.
// Only the HTTP transport differs (fetch instead of aiohttp / requests).

/** A NeMo-Gym output item, reduced to the fields the converter sets. */
export type GymItem =
  | { type: 'message'; role: 'system' | 'user' | 'developer'; text: string }
  | {
      type: 'message';
      role: 'assistant';
      id: string;
      text: string;
      prompt_token_ids: number[];
      generation_token_ids: number[];
      generation_log_probs: number[];
    }
  | { type: 'function_call'; call_id: string; id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string };

/** Python's `x or default` for the JSON values the converter reads. */
function or<T>(v: unknown, d: T): T {
  return v === undefined || v === null || v === '' || v === false || v === 0 || (Array.isArray(v) && v.length === 0) ? d : (v as T);
}

/** Python's json.dumps with its default separators (", " and ": "). */
function pyDumps(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyDumps).join(', ')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: ${pyDumps(x)}`)
      .join(', ')}}`;
  return JSON.stringify(v);
}

/** convert_prorl_messages_to_output_items (run_prorl.py@b785ff0:77-174). */
export function convertProrlMessages(messages: Array<Record<string, unknown>>): GymItem[] {
  const out: GymItem[] = [];
  const pending: string[] = []; // :91
  let counter = 0; // :92
  for (const item of messages) {
    const role = item.role ?? ''; // :95
    const content = or(item.content, ''); // :96
    if (role === 'system' || role === 'user' || role === 'developer') {
      if (content) out.push({ type: 'message', role, text: content as string }); // :98-107
    } else if (role === 'assistant') {
      const toolCalls = or<Array<Record<string, unknown>>>(item.tool_calls, []); // :110
      out.push({
        type: 'message',
        role: 'assistant',
        id: `msg-${out.length}`, // :117
        text: content as string,
        generation_token_ids: or(item.token_ids, []), // :111
        prompt_token_ids: or(item.input_ids, []), // :112
        generation_log_probs: or(item.logprobs, []), // :113
      });
      for (const tc of toolCalls) {
        counter += 1; // :137
        const callId = `call_${counter}`; // :138
        let args = tc.arguments ?? ''; // :140
        if (args !== null && typeof args === 'object' && !Array.isArray(args)) args = pyDumps(args); // :141-142
        out.push({ type: 'function_call', call_id: callId, id: callId, name: (tc.name ?? '') as string, arguments: args as string }); // :143-152
        pending.push(callId); // :153
      }
    } else if (role === 'tool') {
      let id = item.tool_call_id as string | null | undefined; // :157
      if ((id === undefined || id === null) && pending.length > 0)
        id = pending.shift(); // :158-159
      else if (id !== undefined && id !== null && pending.includes(id)) pending.splice(pending.indexOf(id), 1); // :160-161
      if (id) out.push({ type: 'function_call_output', call_id: id, output: typeof content === 'string' ? content : pyDumps(content) }); // :163-172
    }
  }
  return out;
}

/** extract_input_messages_from_trajectory (utils.py@b785ff0:60-112): leading system/user messages become the input. */
export function extractInputMessages(items: GymItem[]): { input: Array<{ role: string; content: string }>; output: GymItem[] } {
  const input: Array<{ role: string; content: string }> = [];
  const output: GymItem[] = [];
  for (const [i, item] of items.entries()) {
    const isAssistant = item.type === 'message' && item.role === 'assistant'; // :86
    const isFunction = item.type === 'function_call' || item.type === 'function_call_output'; // :87-90
    if (isAssistant || isFunction) {
      output.push(...items.slice(i)); // :92-94
      break;
    }
    if (item.type === 'message' && item.text) {
      input.push({ role: item.role, content: item.text }); // :97-108
      continue;
    }
    output.push(item); // :110
  }
  return { input, output };
}

/** convert_tools_to_function_format (utils.py@b785ff0:377-402): only `{type: "function", function: {...}}` entries count. */
export function convertTools(raw: Array<Record<string, any>>): Array<{ name: string; description?: string; parameters?: unknown }> {
  return raw
    .filter((t) => t.type === 'function' && t.function !== undefined)
    .map((t) => ({ name: t.function.name ?? '', description: t.function.description, parameters: t.function.parameters }));
}

/** The rollout Gym hands to training: SWEBenchVerifyResponse's fields (app.py@b785ff0:380-405). */
export interface GymVerify {
  reward: number;
  resolved: number;
  patch_exists: number;
  patch_successfully_applied: number;
  swebench_metrics: Record<string, unknown>;
  input: Array<{ role: string; content: string }>;
  output: GymItem[];
  tools: Array<{ name: string }>;
}

/** What Gym's Responses API request carries for one SWE-bench row (its metadata and sampling fields). */
export interface GymRunRequest {
  metadata: Record<string, string>;
  temperature?: number;
  top_p?: number;
  max_output_tokens?: number;
}

/** An HTTP error as aiohttp's raise_for_status raises it. */
export class ClientResponseError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`${status}, message='${body}'`);
    this.name = 'ClientResponseError';
  }
}

/** call_prorl_process (run_prorl.py@b785ff0:177-196): one POST /process, raise_for_status, the JSON body. */
export async function callProrlProcess(
  prorlUrl: string,
  instance: unknown,
  samplingParams: Record<string, unknown>,
  jobId?: string,
): Promise<Record<string, any>> {
  const body: Record<string, unknown> = { instance, sampling_params: samplingParams }; // :185-188
  if (jobId !== undefined) body.job_id = jobId; // :189-190
  const res = await fetch(`${prorlUrl}/process`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 400) throw new ClientResponseError(res.status, text); // :195
  return JSON.parse(text) as Record<string, any>; // :196
}

/** The raw answer of the last /process, kept beside Gym's reading so tests can say what raas sent. */
export interface GymRun {
  verify: GymVerify;
  /** The /process body as raas answered it; undefined when the call failed. */
  result?: Record<string, any>;
}

/**
 * SWEBenchWrapper.run → _run_with_prorl (app.py@b785ff0:322-438): the instance is
 * json.loads(metadata["instance_dict"]), job_id the row's instance_id or "unknown", sampling_params
 * only temperature / top_p / max_output_tokens; any exception becomes a reward-0 rollout.
 */
export async function gymRun(prorlUrl: string, req: GymRunRequest): Promise<GymRun> {
  let result: Record<string, any> | undefined;
  try {
    const metadata = req.metadata ?? {}; // :325
    const instanceId = metadata.instance_id ?? 'unknown'; // :326
    const instance = JSON.parse(metadata.instance_dict!) as unknown; // :329
    const sampling: Record<string, unknown> = {}; // :331-339
    for (const key of ['temperature', 'top_p', 'max_output_tokens'] as const)
      if (req[key] !== undefined && req[key] !== null) sampling[key] = req[key];
    result = await callProrlProcess(prorlUrl, instance, sampling, instanceId); // :342-348
    const messages = or<Array<Record<string, unknown>>>(result.messages, []); // :351
    const toolsRaw = or<Array<Record<string, any>>>(result.tools, []); // :352
    const resolved = Boolean(result.resolved ?? false); // :353
    const success = Boolean(result.success ?? false); // :354
    const gitPatch = result.git_patch; // :355
    const patchExists = Boolean(gitPatch); // :356
    const items = convertProrlMessages(messages); // :358
    const tools = toolsRaw.length > 0 ? convertTools(toolsRaw) : []; // :359
    const { input, output } = extractInputMessages(items); // :362
    return {
      result,
      verify: {
        reward: resolved ? 1.0 : 0.0, // :380
        resolved: resolved ? 1.0 : 0.0,
        patch_exists: patchExists ? 1.0 : 0.0,
        patch_successfully_applied: success ? 1.0 : 0.0, // :387
        swebench_metrics: {
          resolved,
          patch_exists: patchExists,
          patch_successfully_applied: success,
          git_patch: gitPatch,
          critical_error: result.critical_error, // :393
          end_properly: result.end_properly ?? true, // :394
          filter: result.filter ?? false, // :395
          error: result.error, // :396
        },
        input,
        output,
        tools,
      },
    };
  } catch (e) {
    // run() (app.py@b785ff0:411-438): a failed call is a rollout with reward 0 and critical_error "run".
    const err = e as Error;
    return {
      result,
      verify: {
        reward: 0.0,
        resolved: 0.0,
        patch_exists: 0.0,
        patch_successfully_applied: 0.0,
        swebench_metrics: { critical_error: 'run', error: `${err.name}: ${err.message}` },
        input: [],
        output: [],
        tools: [],
      },
    };
  }
}

/** What initialize_prorl_server printed: Gym carries on in every case, so the test reads the outcome. */
export type GymInitOutcome = 'started' | 'already running' | 'start failed' | 'registered' | 'register failed';

/**
 * initialize_prorl_server (run_prorl.py@b785ff0:199-227), called from model_post_init
 * (app.py@b785ff0:176-182): POST /start (400 means "already running"), then POST /add_llm_server.
 */
export async function initializeProrlServer(prorlUrl: string, modelEndpoint: string): Promise<GymInitOutcome[]> {
  const said: GymInitOutcome[] = [];
  try {
    const res = await fetch(`${prorlUrl}/start`, { method: 'POST', signal: AbortSignal.timeout(30_000) }); // :208
    if (res.status === 400)
      said.push('already running'); // :209-210
    else if (res.status >= 400)
      said.push('start failed'); // :212 raise_for_status → :214-215
    else said.push('started'); // :213
  } catch {
    said.push('start failed');
  }
  try {
    const res = await fetch(`${prorlUrl}/add_llm_server`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ address: modelEndpoint }), // :219-223
      signal: AbortSignal.timeout(30_000),
    });
    said.push(res.status >= 400 ? 'register failed' : 'registered'); // :224-227
  } catch {
    said.push('register failed');
  }
  return said;
}

/** get_model_endpoint (utils.py@b785ff0:612-621): the model server as Gym registers it. */
export function modelEndpoint(host: string, port: number): string {
  return `http://${host}:${port}/v1`;
}
