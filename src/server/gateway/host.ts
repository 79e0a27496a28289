import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Tokenizer } from '../../tokens/tokenizer.js';
import { anthropicMessages, translateMessages } from './anthropic.js';
import { failureOf, invalid, type ApiAdapter, type ApiState, type GatewayFailure } from './api.js';
import { toChatMessage, type GwRequest } from './conversation.js';
import type { JobGateway } from './engine.js';
import { openaiChat } from './openai-chat.js';
import { openaiResponses } from './responses.js';
import { GATEWAY_LIMITS, tooManyJsonValues, toolsProblem } from './limits.js';
import { SseWriter } from './sse.js';
import { MessagesRequest } from '../../protocol/gateway.js';

/** The socket's name inside an endpoint's directory. */
const SOCKET_NAME = 'gateway.sock';
/** The relay's name inside an endpoint's directory (run by the sandbox's node). */
const RELAY_NAME = 'relay.mjs';

/** The compiled relay (dist/src/server/gateway/relay-main.js), whether this module runs compiled or from source. */
function relaySource(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.join(here, 'relay-main.js'), path.resolve(here, '../../../dist/src/server/gateway/relay-main.js')];
  const found = candidates.find((c) => fs.existsSync(c));
  if (!found) throw new Error(`the gateway relay is not built (looked for ${candidates.join(', ')}): run npm run build`);
  return found;
}

/** One job's endpoint: a Unix socket in a directory of its own, bound into that job's sandbox only. */
export interface GatewayEndpoint {
  /** Host directory holding the socket (bind it into the sandbox, read-only). */
  readonly dir: string;
  /** Host path of the socket. */
  readonly socket: string;
  /** Host path of the relay script (node builtins only), beside the socket. */
  readonly relay: string;
  /** Starts answering with this job's gateway, until the signal aborts or close(); `model` is what GET /v1/models lists. */
  attach(gateway: JobGateway, signal: AbortSignal, model?: string): Promise<void>;
  /** Stops listening, ends open connections, removes the directory. Safe twice. */
  close(): Promise<void>;
}

interface Attached {
  gateway: JobGateway;
  signal: AbortSignal;
  state: ApiState;
  tokenizer: Tokenizer;
  seq: number;
  model: string;
}

/**
 * The host side of every job's gateway: one fastify app that no port ever reaches. Each job gets a
 * Unix socket in a directory of its own; connections accepted there are handed to the app, and the
 * socket they came from (never anything in the request) tells which job a call belongs to. The
 * sandbox reaches its socket through a read-only bind and a loopback relay inside its own network
 * namespace; the host never opens a path inside a sandbox.
 */
export class GatewayHost {
  private readonly app: FastifyInstance;
  private readonly bySocket = new WeakMap<net.Socket, { ep: Endpoint }>();
  private readonly endpoints = new Set<Endpoint>();
  private closing: Promise<void> | undefined;

  private constructor(
    readonly root: string,
    private readonly model: string,
    /** @internal The relay's code, copied into every endpoint's directory. */
    readonly relayCode: Buffer,
  ) {
    // Harnesses resend their whole history (and tool schemas) on every call; the limit is the Messages API's own.
    this.app = Fastify({ bodyLimit: GATEWAY_LIMITS.bodyBytes, logger: false, forceCloseConnections: true });
    // A body of a million tiny values would hold the event loop for seconds in JSON.parse: counted first.
    const json = this.app.getDefaultJsonParser('error', 'error');
    this.app.removeContentTypeParser('application/json');
    this.app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
      if (tooManyJsonValues(body as Buffer))
        return done(
          Object.assign(
            new Error(
              `the body holds more than ${GATEWAY_LIMITS.jsonPunctuation} JSON values: no conversation that fits a context window does`,
            ),
            { statusCode: 413 },
          ),
        );
      return json(req, (body as Buffer).toString('utf8'), done);
    });
    this.routes();
  }

  /** Starts the host: `root` (created when missing, else a fresh temporary directory) holds the endpoints. */
  static async start(opts: { root?: string; model?: string } = {}): Promise<GatewayHost> {
    const root = opts.root
      ? (fs.mkdirSync(opts.root, { recursive: true }), fs.mkdtempSync(path.join(opts.root, 'gw-')))
      : fs.mkdtempSync(path.join(os.tmpdir(), 'raas-gw-'));
    // The sandbox user must traverse to its endpoint's directory (bwrap binds it as that user); listing is not needed.
    fs.chmodSync(root, 0o711);
    const host = new GatewayHost(root, opts.model ?? 'raas-policy', fs.readFileSync(relaySource()));
    await host.app.ready();
    return host;
  }

  /** A new endpoint's directory, made now (INIT binds it into the sandbox); it listens from attach() on. */
  endpoint(): GatewayEndpoint {
    if (this.closing) throw new Error('gateway host is closed');
    // A random name: the sandbox's mount table shows it, and a counter would tell how many jobs the server ran.
    const dir = fs.mkdtempSync(path.join(this.root, 'job-'));
    fs.chmodSync(dir, 0o711);
    fs.writeFileSync(path.join(dir, RELAY_NAME), this.relayCode, { mode: 0o644 });
    const ep = new Endpoint(dir, this);
    this.endpoints.add(ep);
    return ep;
  }

  /** @internal A connection accepted on an endpoint's socket: handed to the app, tagged with its endpoint. */
  accept(sock: net.Socket, ep: Endpoint): void {
    this.bySocket.set(sock, { ep });
    this.app.server.emit('connection', sock);
  }

  /** @internal */
  forget(ep: Endpoint): void {
    this.endpoints.delete(ep);
  }

  /** Closes every endpoint and the app. Safe twice. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.all([...this.endpoints].map((e) => e.close()));
      await this.app.close();
      fs.rmSync(this.root, { recursive: true, force: true });
    })();
    return this.closing;
  }

  private attachedOf(req: FastifyRequest): Attached | undefined {
    return this.bySocket.get(req.raw.socket as net.Socket)?.ep.attached;
  }

  private routes(): void {
    const app = this.app;
    for (const prefix of ['/v1', '']) {
      app.post(`${prefix}/chat/completions`, (req, reply) => this.call(openaiChat, req, reply));
      app.post(`${prefix}/responses`, (req, reply) => this.call(openaiResponses, req, reply));
      app.post(`${prefix}/messages`, (req, reply) => this.call(anthropicMessages, req, reply));
      app.post(`${prefix}/messages/count_tokens`, (req, reply) => this.countTokens(req, reply));
      app.get(`${prefix}/models`, async (req) => {
        const created = Math.floor(Date.now() / 1000);
        const model = this.attachedOf(req)?.model ?? this.model;
        // OpenAI's list shape; Anthropic's SDK reads `data[].id` too (type, display_name added for it).
        return {
          object: 'list',
          data: [
            {
              id: model,
              object: 'model',
              created,
              owned_by: 'raas',
              type: 'model',
              display_name: model,
              created_at: new Date(created * 1000).toISOString(),
            },
          ],
          has_more: false,
          first_id: model,
          last_id: model,
        };
      });
    }
    app.setNotFoundHandler((req, reply) => {
      const f: GatewayFailure = {
        status: 404,
        kind: 'not_found',
        message: `no route ${req.method} ${req.url}: the gateway serves /v1/chat/completions, /v1/responses, /v1/messages and /v1/models`,
      };
      void this.fail(req.url.includes('/messages') ? anthropicMessages : openaiChat, reply, f);
    });
    app.setErrorHandler((err: FastifyError, req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      const f: GatewayFailure = { status, kind: status < 500 ? 'invalid_request' : 'internal', message: err.message };
      void this.fail(req.url.includes('/messages') ? anthropicMessages : openaiChat, reply, f);
    });
  }

  private fail(adapter: Pick<ApiAdapter<never>, 'error'>, reply: FastifyReply, f: GatewayFailure): FastifyReply {
    // A refused call after the job ended must not be retried by the SDK (openai-node and the Anthropic SDK honour this header).
    if (f.kind === 'closed') reply.header('x-should-retry', 'false');
    return reply.code(f.status).send(adapter.error(f));
  }

  private async call<B>(adapter: ApiAdapter<B>, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const at = this.attachedOf(req);
    if (!at)
      return this.fail(adapter, reply, {
        status: 409,
        kind: 'closed',
        message: 'this job has no running gateway (it has not started RUN, or it ended)',
      });
    if (at.gateway.isClosed || at.signal.aborted)
      return this.fail(adapter, reply, { status: 409, kind: 'closed', message: 'this job has ended: its gateway takes no more calls' });
    const parsed = adapter.schema.safeParse(req.body);
    if (!parsed.success) return this.fail(adapter, reply, invalid(parsed.error.issues[0]!));
    const body = parsed.data;
    const tooLarge = toolsProblem((body as { tools?: unknown }).tools);
    if (tooLarge) return this.fail(adapter, reply, { status: 400, kind: 'invalid_request', message: tooLarge, param: 'tools' });
    const refused = adapter.check?.(body);
    if (refused) return this.fail(adapter, reply, refused);
    let gw: GwRequest;
    try {
      gw = adapter.translate(body, at.state);
    } catch (err) {
      const param = (err as { param?: string }).param;
      return this.fail(adapter, reply, {
        status: 400,
        kind: 'invalid_request',
        message: (err as Error).message,
        ...(param ? { param } : {}),
      });
    }
    const n = ++at.seq;
    const ctx = {
      id: adapter.api === 'messages' ? `msg_raas_${n}` : adapter.api === 'responses' ? `resp_raas_${n}` : `chatcmpl-raas-${n}`,
      created: Math.floor(Date.now() / 1000),
      model: gw.asked.model ?? at.model,
    };
    // A harness that hangs up stops its call: nothing it will never see is generated or kept.
    const gone = new AbortController();
    const onClose = (): void => {
      if (!reply.raw.writableFinished) gone.abort(new Error('the harness closed the connection'));
    };
    reply.raw.on('close', onClose);
    const signal = AbortSignal.any([at.signal, gone.signal]);
    try {
      if (!adapter.streamed(body)) {
        const answer = await at.gateway.complete(gw, signal).catch((err: unknown) => err as Error);
        if (answer instanceof Error) return this.fail(adapter, reply, failureOf(answer));
        adapter.remember?.(body, answer, ctx, at.state, gw);
        return reply.send(adapter.json(answer, ctx, body));
      }
      reply.hijack();
      const sse = new SseWriter(reply.raw);
      sse.keepAlive();
      const answer = await at.gateway.complete(gw, signal).catch((err: unknown) => err as Error);
      sse.stop();
      if (answer instanceof Error) {
        const f = failureOf(answer);
        if (sse.isOpen) {
          const e = adapter.errorEvent(f);
          sse.event(e.data, e.name);
          sse.end();
        } else {
          reply.raw.writeHead(f.status, {
            'content-type': 'application/json',
            ...(f.kind === 'closed' ? { 'x-should-retry': 'false' } : {}),
          });
          reply.raw.end(JSON.stringify(adapter.error(f)));
        }
        return reply;
      }
      adapter.remember?.(body, answer, ctx, at.state, gw);
      for (const e of adapter.events(answer, ctx, body)) sse.event(e.data, e.name);
      sse.end();
      return reply;
    } finally {
      reply.raw.off('close', onClose);
    }
  }

  /** Anthropic's count_tokens: the request rendered whole with the chat template, encoded off the event loop. */
  private async countTokens(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const at = this.attachedOf(req);
    if (!at || at.gateway.isClosed || at.signal.aborted)
      return this.fail(anthropicMessages, reply, { status: 409, kind: 'closed', message: 'this job has no running gateway' });
    const parsed = MessagesRequest.safeParse(req.body);
    if (!parsed.success) return this.fail(anthropicMessages, reply, invalid(parsed.error.issues[0]!));
    const tooLarge = toolsProblem(parsed.data.tools);
    if (tooLarge) return this.fail(anthropicMessages, reply, { status: 400, kind: 'invalid_request', message: tooLarge, param: 'tools' });
    const { messages, tools } = translateMessages(parsed.data);
    const tok = at.tokenizer;
    const chunks = tok.promptChunks(messages.map(toChatMessage), { tools });
    const ids = tok.encodeChunksAsync ? await tok.encodeChunksAsync(chunks, at.signal) : tok.encodeChunks(chunks);
    return { input_tokens: ids.length };
  }
}

/** One job's endpoint (see GatewayEndpoint). */
class Endpoint implements GatewayEndpoint {
  readonly socket: string;
  readonly relay: string;
  attached: Attached | undefined;
  private server: net.Server | undefined;
  private readonly conns = new Set<net.Socket>();
  private closing: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    private readonly host: GatewayHost,
  ) {
    this.socket = path.join(dir, SOCKET_NAME);
    this.relay = path.join(dir, RELAY_NAME);
  }

  async attach(gateway: JobGateway, signal: AbortSignal, model = 'raas-policy'): Promise<void> {
    if (this.closing) throw new Error('gateway endpoint is closed');
    this.attached = { gateway, signal, state: { responses: new Map() }, tokenizer: gateway.tokenizer, seq: 0, model };
    const server = net.createServer((sock) => {
      if (this.closing) return void sock.destroy();
      this.conns.add(sock);
      sock.on('close', () => this.conns.delete(sock));
      this.host.accept(sock, this);
    });
    // Past this many open connections the server closes new ones at once (node's net.Server.maxConnections).
    server.maxConnections = GATEWAY_LIMITS.connections;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.socket, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // The sandbox user connects through the bind; the directory (0711) keeps everyone else from finding it.
    fs.chmodSync(this.socket, 0o666);
    signal.addEventListener('abort', () => gateway.close(), { once: true });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.attached?.gateway.close();
      const server = this.server;
      if (server) await new Promise<void>((r) => server.close(() => r()));
      for (const c of this.conns) c.destroy();
      fs.rmSync(this.dir, { recursive: true, force: true });
      this.host.forget(this);
    })();
    return this.closing;
  }
}
