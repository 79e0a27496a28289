import type { z } from 'zod';
import { cancellationKind, fieldPath, RaasError } from '../../protocol/errors.js';
import type { GwAnswer, GwRequest } from './conversation.js';

/** Names and times of one answer, shared by its JSON and its stream. */
export interface AnswerContext {
  id: string;
  /** Seconds since the epoch. */
  created: number;
  model: string;
}

/** One server-sent event: Anthropic and the Responses API name theirs, chat completions does not. */
export interface SseEvent {
  name?: string;
  data: unknown;
}

/** A failed call, in the words every API's error shape is built from. */
export interface GatewayFailure {
  status: number;
  kind: 'invalid_request' | 'closed' | 'context_length' | 'backend' | 'not_found' | 'internal';
  message: string;
  /** The request field at fault, for invalid requests. */
  param?: string;
}

/** Per-job memory an API needs between calls (the Responses API's stored responses). */
export interface ApiState {
  responses: Map<string, unknown[]>;
}

/** One wire API: how its requests become a GwRequest and how a GwAnswer becomes its answer. */
export interface ApiAdapter<B> {
  readonly api: GwRequest['api'];
  readonly schema: z.ZodType<B>;
  /** A refusal the schema cannot express (a field this API requires that count_tokens does not). */
  check?(body: B): GatewayFailure | undefined;
  translate(body: B, state: ApiState): GwRequest;
  streamed(body: B): boolean;
  json(answer: GwAnswer, ctx: AnswerContext, body: B): unknown;
  events(answer: GwAnswer, ctx: AnswerContext, body: B): SseEvent[];
  error(f: GatewayFailure): unknown;
  errorEvent(f: GatewayFailure): SseEvent;
  /** After a successful call (the Responses API stores the conversation under the answer's id). */
  remember?(body: B, answer: GwAnswer, ctx: AnswerContext, state: ApiState, req: GwRequest): void;
}

/** A request body that failed its schema, naming the field. */
export function invalid(issue: { path: PropertyKey[]; message: string }): GatewayFailure {
  const param = fieldPath(issue.path);
  return { status: 400, kind: 'invalid_request', message: `${param}: ${issue.message}`, ...(issue.path.length ? { param } : {}) };
}

/** Maps what a call threw onto a failure every API can word. */
export function failureOf(err: unknown): GatewayFailure {
  if (err instanceof RaasError) {
    if (err.code === 'gateway_closed') return { status: 409, kind: 'closed', message: err.message };
    if (err.code === 'context_length_exceeded') return { status: 400, kind: 'context_length', message: err.message };
    if (err.code === 'bad_request') return { status: 400, kind: 'invalid_request', message: err.message };
    if (err.code === 'backend_unavailable') return { status: 503, kind: 'backend', message: err.message };
  }
  if (cancellationKind(err)) return { status: 409, kind: 'closed', message: 'this job has ended: its gateway takes no more calls' };
  return { status: 500, kind: 'internal', message: err instanceof Error ? err.message : String(err) };
}
