import type { FastifyReply, FastifyRequest } from 'fastify';
import { RaasError } from '../protocol/errors.js';
import type { ServerConfig } from '../protocol/config-server.js';
import { describeUnknownKey, unknownProcessKeys, warningHeader } from '../protocol/strict.js';

/**
 * POST /process keys the server does not read (src/protocol/strict.ts): refused with 400
 * `unknown_key` in strict mode (`Prefer: handling=strict`, RFC 7240, or `unknown_request_keys:
 * reject`), otherwise named in a `Warning` header of the answer (lenient, ProRL's behaviour and the
 * default). A request's `Prefer: handling=…` is echoed in `Preference-Applied`.
 */
export function checkUnknownKeys(req: FastifyRequest, reply: FastifyReply, config: ServerConfig): void {
  const unknown = unknownProcessKeys(req.body);
  if (!unknown.length) return;
  const handling = /\bhandling\s*=\s*(strict|lenient)\b/i.exec(String(req.headers.prefer ?? ''))?.[1]?.toLowerCase();
  if (handling) reply.header('preference-applied', `handling=${handling}`);
  if ((handling ?? (config.unknown_request_keys === 'reject' ? 'strict' : 'lenient')) === 'strict')
    throw new RaasError(
      'unknown_key',
      `unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map(describeUnknownKey).join(', ')}: this server reads no such key; remove it (a backend field goes in sampling_params.extra_body)`,
    );
  reply.header('warning', warningHeader(unknown));
}
