import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RaasError } from '../../protocol/errors.js';
import { NodeHeartbeat, NodeRegistration } from '../../protocol/nodes.js';
import { parseOrThrow } from '../../protocol/validation.js';
import type { Access } from '../tenants/access.js';
import type { NodeRegistry } from './registry.js';

const notFound = (id: string): RaasError =>
  new RaasError(
    'node_not_found',
    `node ${JSON.stringify(id)} is not registered (or was forgotten after missing its heartbeats): POST /nodes/register again`,
  );

/**
 * The node routes (Polar's, src/polar/rollout/server.py): a server registers, heartbeats and is
 * drained with the admin token; every principal may list the nodes (a trainer reads them to find
 * its rollout servers).
 */
export function nodeRoutes(registry: NodeRegistry): (app: FastifyInstance, access: (req: FastifyRequest) => Access) => void {
  return (app, access) => {
    app.post('/nodes/register', async (req) => {
      access(req).admin('POST /nodes/register');
      return registry.register(parseOrThrow(NodeRegistration, req.body ?? {}));
    });
    app.post('/nodes/:id/heartbeat', async (req) => {
      access(req).admin('POST /nodes/{id}/heartbeat');
      const id = (req.params as { id: string }).id;
      return registry.heartbeat(id, parseOrThrow(NodeHeartbeat, req.body ?? {})) ?? Promise.reject(notFound(id));
    });
    app.get('/nodes', async () => registry.list());
    app.get('/nodes/:id', async (req) => {
      const id = (req.params as { id: string }).id;
      return registry.get(id) ?? Promise.reject(notFound(id));
    });
    // Polar: DELETE drains the node. ?leave=true (ours): a drained node that finished leaves for good.
    app.delete('/nodes/:id', async (req) => {
      access(req).admin('DELETE /nodes/{id}');
      const id = (req.params as { id: string }).id;
      const leave = (req.query as { leave?: string }).leave === 'true';
      return (leave ? registry.remove(id) : registry.drain(id)) ?? Promise.reject(notFound(id));
    });
  };
}
