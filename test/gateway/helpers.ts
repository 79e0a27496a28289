import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import type { SimPolicy } from '../../src/sim/policy.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { JobGateway, type JobGatewayOptions } from '../../src/server/gateway/engine.js';
import { GatewayHost, type GatewayEndpoint } from '../../src/server/gateway/host.js';
import { toolParser } from '../../src/server/gateway/tool-parsers.js';
import { SimSession } from '../agent/sim-session.js';

/** A simulator, a gateway host, one job's gateway and endpoint, and a loopback relay to it: the path a harness's calls take. */
export interface GatewayRig {
  sim: SimHandle;
  host: GatewayHost;
  ep: GatewayEndpoint;
  gateway: JobGateway;
  job: AbortController;
  relay: ChildProcess;
  /** http://127.0.0.1:<relay port> */
  base: string;
  close(): Promise<void>;
}

/** Starts the rig: the relay runs as its own process (node relay.mjs), exactly the file a sandbox runs. */
export async function startRig(
  policies: SimPolicy[],
  opts: Partial<Omit<JobGatewayOptions, 'llm' | 'tokenizer'>> = {},
  sim?: SimHandle,
): Promise<GatewayRig> {
  const own = !sim;
  const s = sim ?? (await startSim({ port: 0, request_log: 1000, seed: 3 }, { policies }));
  const host = await GatewayHost.start();
  const ep = host.endpoint();
  const gateway = new JobGateway({
    llm: new SimSession(s.url, 'vllm', 7),
    tokenizer: qwen3Tokenizer(),
    sampling: { enable_thinking: false },
    parser: toolParser('hermes'),
    maxTokensPerTurn: 512,
    ...opts,
  });
  const job = new AbortController();
  await ep.attach(gateway, job.signal);
  const relay = spawn(process.execPath, [ep.relay, JSON.stringify({ socket: ep.socket })], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    relay.once('error', reject);
    readline.createInterface({ input: relay.stdout! }).once('line', resolve);
  });
  const port = (JSON.parse(line) as { port: number }).port;
  return {
    sim: s,
    host,
    ep,
    gateway,
    job,
    relay,
    base: `http://127.0.0.1:${port}`,
    async close() {
      relay.stdin!.end();
      await new Promise((r) => (relay.exitCode !== null ? r(null) : relay.once('exit', r)));
      await host.close();
      if (own) await s.close();
    },
  };
}
