import type { AskedSampling } from './conversation.js';

/**
 * Bounds on what a harness may send the gateway. The sandbox's code can call its gateway with any
 * body, and the chat template renders tool definitions and messages on the server's event loop
 * (only the encoding runs on the worker pool): unbounded, one request stalls every job of the server.
 * The numbers of tools and messages are capped by the request schemas (src/protocol/gateway.ts).
 */
export const GATEWAY_LIMITS = {
  /** Request body bytes: Anthropic's own limit for the Messages API (docs.claude.com/en/api/getting-started, "Request size limits"). */
  bodyBytes: 32 << 20,
  /** Connections one job's gateway socket holds at once (each is a descriptor of the server process). */
  connections: 64,
  /** JSON values in all tool definitions together (objects, arrays, strings, numbers, …). */
  toolNodes: 32_768,
  /** Characters of the strings (keys included) in all tool definitions together. */
  toolChars: 1 << 20,
  /** Nesting depth of a tool definition. */
  toolDepth: 64,
  /**
   * `{`, `[`, `,` and `:` bytes in a body (inside strings too: an upper bound of its JSON values).
   * JSON.parse runs on the event loop and costs about 3 µs per key: an 18 MB object of 1.5 million
   * keys took 5.4 s on a loaded 2-core machine. A conversation that fits a 256k-token context holds
   * a few tens of thousands.
   */
  jsonPunctuation: 262_144,
} as const;

/** True when the body holds more `{ [ , :` bytes than the limit (it is not parsed then). */
export function tooManyJsonValues(body: Buffer, limit = GATEWAY_LIMITS.jsonPunctuation): boolean {
  let n = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if ((c === 0x2c || c === 0x3a || c === 0x5b || c === 0x7b) && ++n > limit) return true;
  }
  return false;
}

/**
 * Why a request's `tools` is too large to render, or undefined. Walked iteratively with early
 * exits, so an adversarial value costs at most the limits' worth of work.
 */
export function toolsProblem(tools: unknown): string | undefined {
  if (!Array.isArray(tools)) return undefined;
  const L = GATEWAY_LIMITS;
  let nodes = 0;
  let chars = 0;
  const stack: Array<[unknown, number]> = [[tools, 0]];
  // Counted as values are reached, not as they are listed: an object of a million keys costs the limit's worth.
  const reach = (v: unknown, depth: number): string | undefined => {
    if (++nodes > L.toolNodes)
      return `tools: the tool definitions hold more than ${L.toolNodes} JSON values; send fewer or smaller schemas`;
    if (depth > L.toolDepth) return `tools: a tool definition nests more than ${L.toolDepth} levels deep`;
    if (typeof v === 'string' && (chars += v.length) > L.toolChars)
      return `tools: the tool definitions hold more than ${L.toolChars} characters of text`;
    if (v && typeof v === 'object') stack.push([v, depth]);
    return undefined;
  };
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (Array.isArray(v)) {
      for (const x of v) {
        const why = reach(x, depth + 1);
        if (why) return why;
      }
      continue;
    }
    const o = v as Record<string, unknown>;
    for (const k in o) {
      if (!Object.hasOwn(o, k)) continue;
      if ((chars += k.length) > L.toolChars) return `tools: the tool definitions hold more than ${L.toolChars} characters of text`;
      const why = reach(o[k], depth + 1);
      if (why) return why;
    }
  }
  return undefined;
}

const clip = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s);

/**
 * What the harness asked, as the job's record keeps it: its own words, clipped. The record goes
 * into the job's result, so a 10 MB model name or a tool_choice nested 100,000 deep must neither
 * grow the result nor make it unserialisable (which would drop the trajectory).
 */
export function recordedAsked(a: AskedSampling): AskedSampling {
  const out: AskedSampling = { ...a };
  if (a.model !== undefined) out.model = clip(a.model, 256);
  if (a.stop !== undefined) out.stop = a.stop.slice(0, 16).map((s) => clip(s, 256));
  if (a.tool_choice !== undefined) {
    let text: string | undefined;
    try {
      text = JSON.stringify(a.tool_choice);
    } catch {
      text = undefined;
    }
    if (text === undefined || text.length > 1024)
      out.tool_choice = { omitted: text === undefined ? 'not serialisable' : `${text.length} characters of JSON` };
  }
  return out;
}
