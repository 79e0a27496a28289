// Real components for the coordinator's integration tests: in-process rollout servers (which a test
// can crash), simulated backends, and a chat dataset.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startRolloutServer, chatHandler } from '../../src/server/index.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startSim } from '../../src/sim/index.js';

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** Writes a chat dataset whose pass rates give the wanted share of zero-variance groups. */
export function chatDataset(count: number, dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-'))): string {
  const rates = [0, 1, 0.5, 0.3, 0.7, 0.5];
  const lines = Array.from({ length: count }, (_, i) =>
    JSON.stringify({ data_source: 'chat', instance_id: `c${i}`, turns: 1 + (i % 2), pass_rate: rates[i % rates.length] }),
  );
  const file = path.join(dir, 'chat.jsonl');
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** A chat handler that counts how many times each job id ran (to prove nothing ran twice). */
export function countingChat(): { handler: AgentHandler<any>; runs: Map<string, number> } {
  const runs = new Map<string, number>();
  const handler: AgentHandler<any> = {
    ...chatHandler,
    async init(ctx) {
      runs.set(ctx.job.id, (runs.get(ctx.job.id) ?? 0) + 1);
      return chatHandler.init(ctx);
    },
  };
  return { handler, runs };
}

/** An in-process rollout server with one simulated backend registered. */
export async function serverWithSim(opts: { decodeMs?: number; runWorkers?: number; handler?: AgentHandler<any>; host?: string } = {}) {
  const sim = await startSim({
    seed: 1,
    latency: { decode_ms_per_token: opts.decodeMs ?? 2 },
    abort_on_weight_update: false,
    host: opts.host ?? '127.0.0.1',
  });
  const server = await startRolloutServer(
    {
      port: 0,
      host: opts.host ?? '127.0.0.1',
      workers: { run: opts.runWorkers ?? 16 },
      llm: { backends: [{ address: sim.url, api: 'vllm' }] },
      log_level: 'silent',
    } as never,
    opts.handler ? { handlers: [opts.handler] } : {},
  );
  return {
    sim,
    server,
    close: async () => {
      await server.close();
      await sim.close();
    },
  };
}

/**
 * Crashes an in-process rollout server as the network sees it: the listener closes and every socket
 * (held /process answers included) is destroyed at once, so clients get resets and refusals. Its
 * pipeline keeps running until the test's cleanup closes it, like a node cut off mid-step.
 */
export function crash(server: { app: { server: import('node:http').Server } }): void {
  server.app.server.close();
  server.app.server.closeAllConnections();
}
