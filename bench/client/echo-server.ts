import Fastify from 'fastify';

/**
 * The client benchmark's server, run as its own process so its CPU is not counted as the client's:
 * answers /process at once with a protocol-valid result of `argv[2]` tokens (default 64) in each token array.
 */
// The answer is the same for every job but its id: serialise it once.
const app = Fastify({ logger: false, keepAliveTimeout: 60_000 });
const tokens = Number(process.argv[2] ?? 64);
const ids = Array.from({ length: tokens }, (_, i) => 1000 + (i % 5000));
app.post('/process', async (req) => {
  const jobId = (req.body as { job_id: string }).job_id;
  return {
    instance_id: 'b',
    trajectory_id: null,
    git_patch: null,
    success: true,
    finish: true,
    messages: [{ role: 'assistant', content: 'x'.repeat(200), token_ids: ids, logprobs: ids.map(() => -0.1) }],
    tools: [],
    end_properly: true,
    resolved: true,
    critical_error: null,
    filter: false,
    error: null,
    job_id: jobId,
    data_source: 'chat',
    reward: 1,
    finish_reason: 'finish',
    backend: 'echo',
    policy_version: 0,
    weight_versions: ['0'],
    num_turns: 1,
    timing: {
      init_time: 0,
      run_time: 0,
      eval_time: 0,
      others_time: 0,
      counted_elapsed: 0,
      timeout_triggered: false,
      queued_s: 0,
      init_s: 0,
      run_s: 0,
      eval_s: 0,
      counted_s: 0,
    },
    tokens: { prompt_ids: ids, response_ids: ids, response_mask: ids.map(() => 1), logprobs: ids.map(() => -0.1) },
  };
});
app.get('/health', async () => ({ status: 'ok' }));
await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`listening ${(app.server.address() as { port: number }).port}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
