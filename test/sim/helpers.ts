import { parseMetrics } from '../../src/sim/index.js';

/** Polls the sim's /metrics until it runs `n` requests: no wall-clock guess on a loaded machine. */
export async function untilRunning(url: string, n: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = parseMetrics(await (await fetch(`${url}/metrics`)).text());
    if (m['vllm:num_requests_running'] === n) return;
    if (Date.now() > deadline) throw new Error(`sim ${url} never reached ${n} running requests (has ${m['vllm:num_requests_running']})`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
