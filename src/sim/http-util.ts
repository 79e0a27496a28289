import type { FastifyReply } from 'fastify';

/**
 * A signal that aborts when the client closes the connection before the answer is written, so the
 * engine stops "generating" for nobody (vLLM aborts such requests too). `dispose` detaches it.
 */
export function clientGone(reply: FastifyReply): { signal: AbortSignal; dispose(): void } {
  const ctrl = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableFinished) ctrl.abort();
  };
  reply.raw.on('close', onClose);
  return { signal: ctrl.signal, dispose: () => reply.raw.off('close', onClose) };
}
