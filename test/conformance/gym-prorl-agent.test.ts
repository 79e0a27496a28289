import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { postJson, request, until } from '../reliability/helpers/servers.js';
import { conformancePolicy, makeSweFixture, NONCE, sandboxRoot, serverConfig, sweRow, type SweFixture } from './fixture.js';
import { gymRun, initializeProrlServer, modelEndpoint, type GymRun, type GymRunRequest } from './gym-client.js';

// NeMo-Gym's prorl_agent (the client NeMo RL drives ProRL Agent Server with) replayed against raas:
// its request sequence and its reading of the answers, through gym-client.ts (a line-by-line port).
// A real rollout server on port 0 (bwrap sandboxes), the simulated vLLM backend registered the way
// Gym registers its model server, and a SWE-bench repository served from handlers.swe.repos_dir.
// Sources, cited per expectation:
//   gym = NVIDIA-NeMo/Gym responses_api_agents/prorl_agent/<file>@b785ff0 (refs/pull/1290/head)
//   ss  = NVIDIA-NeMo/ProRL-Agent-Server scripts/start_server.py@40c1d8a
//   asp = NVIDIA-NeMo/ProRL-Agent-Server openhands/nvidia/async_server_process.py@40c1d8a
//   nu  = NVIDIA-NeMo/ProRL-Agent-Server openhands/nvidia/utils.py@40c1d8a
//   diff "<row>" = the row of docs/api.md's "Differences from ProRL Agent Server" table that says
//   where raas answers otherwise on purpose.
// The tests are one sequence, in Gym's order (the first registers the backend): run the file whole.

/** A Gym dataset row: Responses API params whose metadata carries the SWE-bench row as instance_dict. */
function gymRequest(instance: Record<string, unknown>, opts: { withId?: boolean } = {}): GymRunRequest {
  const metadata: Record<string, string> = {
    instance_dict: JSON.stringify(instance),
    problem_statement: String(instance.problem_statement),
    base_commit: String(instance.base_commit),
    dataset_name: 'acme/calc-bench',
    split: 'test',
  };
  if (opts.withId !== false && typeof instance.instance_id === 'string') metadata.instance_id = instance.instance_id;
  // Gym's swebench_prorl.yaml sampling: temperature / top_p / max_output_tokens only (gym app.py:331-339).
  return { metadata, temperature: 1.0, top_p: 1.0, max_output_tokens: 2048 };
}

/** The keys and types of a /process result in Gym's documented schema (gym run_prorl.py:31-45). */
function expectGymSchema(r: Record<string, any>): void {
  expect(typeof r.instance_id === 'string' || r.instance_id === null).toBe(true);
  expect(['string', 'number'].includes(typeof r.trajectory_id) || r.trajectory_id === null).toBe(true);
  expect(typeof r.git_patch === 'string' || r.git_patch === null).toBe(true);
  for (const k of ['success', 'finish', 'end_properly', 'resolved', 'filter']) expect(typeof r[k], k).toBe('boolean');
  expect(Array.isArray(r.messages)).toBe(true);
  expect(Array.isArray(r.tools)).toBe(true);
  expect(typeof r.error === 'string' || r.error === null).toBe(true);
  // "init" | "run" | "eval" | "timeout" | None (gym run_prorl.py:42); raas adds "cancelled" (diff "a job ended by /cancel or /stop").
  expect(['init', 'run', 'eval', 'timeout', 'cancelled', null]).toContain(r.critical_error);
}

describe('NeMo-Gym prorl_agent against raas (rollout server + simulated vLLM + bwrap + repos_dir)', () => {
  let fx: SweFixture;
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = sandboxRoot('gym');
  let endpoint: string;
  let samples: GymRun[] = [];

  beforeAll(async () => {
    fx = makeSweFixture();
    sim = await startSim({ seed: 1 }, { policies: [conformancePolicy] });
    srv = await startRolloutServer({ port: 0, log_level: 'silent', ...serverConfig(fx, root) });
    endpoint = modelEndpoint('127.0.0.1', sim.port);
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
    fx?.remove();
  });

  const status = async () => (await request(`${srv.url}/status`)).body;

  it('model_post_init, from two Gym agent servers: /start then /add_llm_server with http://host:port/v1, both accepted', async () => {
    // gym app.py:176-182 → run_prorl.py:199-227; the endpoint is http://{host}:{port}/v1 (gym utils.py:612-621).
    // ProRL answers the second /start 400 "already running" (ss:405-408), which Gym prints and accepts
    // (gym run_prorl.py:209-210); raas answers 200 (diff "POST /start on a running server").
    expect(await initializeProrlServer(srv.url, endpoint)).toEqual(['started', 'registered']);
    expect(await initializeProrlServer(srv.url, endpoint)).toEqual(['started', 'registered']);
    // A duplicate address is ignored (ss:539-541): one backend.
    expect((await status()).backends).toHaveLength(1);
  });

  it('three samples of one instance under job_id = instance_id, sent at once: three rollouts, each scored as Gym scores it', async () => {
    const row = sweRow(fx, 'fix');
    // The HF row as Gym forwards it (gym app.py:329): no data_source (ProRL: swebench, asp:774),
    // FAIL_TO_PASS / PASS_TO_PASS as JSON strings, no files.
    expect(row).not.toHaveProperty('data_source');
    expect(typeof row.FAIL_TO_PASS).toBe('string');
    const running = Promise.all([0, 1, 2].map(() => gymRun(srv.url, gymRequest(row))));
    // /status while they run: ProRL's keys (ss:480-505, asp:838-866). ProRL keys its jobs by job_id
    // and would count one; raas runs three (diff "two /process with one job_id at once").
    let seen: any;
    await until(async () => (seen = await status()).pending_jobs === 3, 'three jobs pending', 20_000);
    expect(seen).toMatchObject({ status: 'running', running: true, pending_jobs: 3, jobs: 3 });
    expect(seen.init + seen.run + seen.eval).toBeLessThanOrEqual(3);
    samples = await running;

    for (const { verify, result } of samples) {
      expect(result, JSON.stringify(verify.swebench_metrics)).toBeDefined();
      expectGymSchema(result!);
      // Every sample answers under the job id it was sent with (ss:608 takes the id as given).
      expect(result).toMatchObject({ job_id: 'acme__calc-1', instance_id: 'acme__calc-1', trajectory_id: null, data_source: 'swe' });
      // gym app.py:380-405: reward = 1 if resolved; patch_successfully_applied is ProRL's `success`.
      expect(verify).toMatchObject({ reward: 1, resolved: 1, patch_exists: 1, patch_successfully_applied: 1 });
      expect(verify.swebench_metrics).toEqual({
        resolved: true,
        patch_exists: true,
        patch_successfully_applied: true,
        git_patch: fx.goldPatch,
        critical_error: null,
        end_properly: true,
        filter: false,
        error: null,
      });
      // Leading system and user messages become the request's input (gym app.py:362-366, utils.py:60-112).
      expect(verify.input.map((m) => m.role)).toEqual(['system', 'user']);
      expect(verify.input[1]!.content).toContain(String(row.problem_statement));
      expect(verify.output[0]).toMatchObject({ type: 'message', role: 'assistant' });
      // ChatCompletion tool definitions, which Gym flattens (gym utils.py:377-402).
      expect(verify.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['execute_bash', 'str_replace_editor', 'think', 'finish']));
      // ProRL's messages end with the last assistant message (nu:271-272, 282-283).
      expect(result!.messages.at(-1).role).toBe('assistant');
      // No token fields unless the request asks (nu:309-325); Gym sends no token_level_generation.
      const assistant = verify.output.filter((i) => i.type === 'message' && i.role === 'assistant') as Array<{
        generation_token_ids: number[];
      }>;
      for (const a of assistant) expect(a.generation_token_ids).toEqual([]);
    }
    // Each request is a job of its own, sampled anew (ss:608, asp:799; docs/api.md "Seeds").
    const nonces = samples.map(({ result }) => NONCE.exec(JSON.stringify(result!.messages))?.[1]);
    expect(nonces.every((n) => n !== undefined)).toBe(true);
    expect(new Set(nonces).size).toBe(3);
  }, 90_000);

  it("Gym pairs each tool output with the tool call it answers (call_1, call_2, … by order, as ProRL's messages let it)", () => {
    // ProRL rebuilds every message as {role, content[, tool_calls]} (nu:290-306): tool messages carry no
    // tool_call_id, and Gym gives calls the ids call_1, call_2, … and pairs a tool message without an
    // id with the oldest unanswered call (gym run_prorl.py:135-172). A tool_call_id Gym did not make
    // is kept as it is (gym run_prorl.py:157-163), and the output answers no call.
    expect(samples).toHaveLength(3);
    for (const { verify } of samples) {
      const calls = verify.output.filter((i) => i.type === 'function_call') as Array<{ call_id: string; name: string }>;
      const outputs = verify.output.filter((i) => i.type === 'function_call_output') as Array<{ call_id: string; output: string }>;
      // bash + think, the edit, finish; finish's observation is trimmed (it follows the last assistant message).
      expect(calls.map((c) => [c.call_id, c.name])).toEqual([
        ['call_1', 'execute_bash'],
        ['call_2', 'think'],
        ['call_3', 'str_replace_editor'],
        ['call_4', 'finish'],
      ]);
      expect(
        outputs.map((o) => o.call_id),
        'function_call_output.call_id must name a function_call of the same rollout',
      ).toEqual(['call_1', 'call_2', 'call_3']);
      // The command's output first; raas then appends the exit-code line OpenHands' bash observations carry.
      expect(outputs[0]!.output.trim().split('\n')[0]).toBe('0');
    }
  });

  it('a turn with a tool call that does not parse, then a good one: Gym still pairs the good call with its output', async () => {
    // The same pairing rule (gym run_prorl.py:155-172): every output must answer a call of the rollout.
    const { verify } = await gymRun(srv.url, gymRequest(sweRow(fx, 'malformed', { instance_id: 'acme__calc-3' })));
    const calls = verify.output.filter((i) => i.type === 'function_call') as Array<{ call_id: string; name: string; arguments: string }>;
    const outputs = verify.output.filter((i) => i.type === 'function_call_output') as Array<{ call_id: string; output: string }>;
    const good = calls.find((c) => c.arguments.includes('echo good'));
    expect(good, JSON.stringify(verify.output)).toBeDefined();
    const answers = outputs.filter((o) => o.call_id === good!.call_id).map((o) => o.output);
    expect(answers, `the outputs answering ${good!.call_id}, among ${JSON.stringify(outputs)}`).toEqual([expect.stringContaining('good')]);
    for (const o of outputs)
      expect(
        calls.map((c) => c.call_id),
        `output ${JSON.stringify(o)} answers no function_call`,
      ).toContain(o.call_id);
  }, 60_000);

  it('a SWE-bench row whose repository nothing provides: 200 with critical_error "init", which Gym scores 0', async () => {
    const row = sweRow(fx, 'fix', { repo: 'acme/absent', instance_id: 'acme__absent-1' });
    const { verify, result } = await gymRun(srv.url, gymRequest(row));
    expect(result, JSON.stringify(verify.swebench_metrics)).toBeDefined();
    expectGymSchema(result!);
    // An INIT failure is a 200 result (nu:397-422): no patch, no messages, filter true (nu:600-612), a traceback.
    expect(result).toMatchObject({
      instance_id: 'acme__absent-1',
      critical_error: 'init',
      success: false,
      finish: false,
      resolved: false,
      filter: true,
      end_properly: false,
      git_patch: null,
      messages: [],
    });
    expect(result!.traceback).toBeTypeOf('string');
    // The error names what was looked for (the image or the repository).
    expect(result!.error).toContain('acme/absent');
    expect(verify).toMatchObject({ reward: 0, resolved: 0, patch_exists: 0, patch_successfully_applied: 0, output: [], input: [] });
    expect(verify.swebench_metrics).toMatchObject({ critical_error: 'init', filter: true, end_properly: false });
  }, 60_000);

  it('rows without an instance id share job_id "unknown": each gets its own answer', async () => {
    // gym app.py:326: metadata.get("instance_id", "unknown"), sent as the job id (gym app.py:346).
    const solvable = sweRow(fx, 'fix');
    const absent = sweRow(fx, 'fix', { repo: 'acme/absent' });
    delete solvable.instance_id;
    delete absent.instance_id;
    const [a, b] = await Promise.all([gymRun(srv.url, gymRequest(solvable)), gymRun(srv.url, gymRequest(absent))]);
    for (const r of [a, b]) {
      expect(r.result, JSON.stringify(r.verify.swebench_metrics)).toBeDefined();
      expectGymSchema(r.result!);
      // nu:580-594: instance_id copied from the instance, None when absent.
      expect(r.result).toMatchObject({ job_id: 'unknown', instance_id: null });
    }
    expect(a.verify).toMatchObject({ reward: 1, patch_exists: 1 });
    expect(a.verify.swebench_metrics.critical_error).toBeNull();
    expect(b.verify).toMatchObject({ reward: 0, patch_exists: 0 });
    expect(b.verify.swebench_metrics.critical_error).toBe('init');
    expect(b.result!.error).toContain('acme/absent');
  }, 90_000);

  it('/cancel: 200 for an id the server does not know; a running job ends at once with critical_error "cancelled"', async () => {
    // ss:508-531: the child's "not found" (asp:740) is swallowed; 200 either way.
    const unknown = await postJson(`${srv.url}/cancel`, { job_id: 'never-submitted' });
    expect(unknown.status).toBe(200);
    const pending = gymRun(srv.url, gymRequest(sweRow(fx, 'slow', { instance_id: 'acme__calc-slow' })));
    await until(async () => (await request(`${srv.url}/jobs/acme__calc-slow`)).body?.state === 'run', 'the slow job in RUN', 20_000);
    const c = await postJson(`${srv.url}/cancel`, { job_id: 'acme__calc-slow' });
    expect(c.status).toBe(200);
    // ProRL answers a cancelled job's request 200 {"error": "'NoneType' object is not iterable"} (asp:741-744,
    // 810-814); raas answers 200 with critical_error "cancelled" (diff "a job ended by /cancel or /stop").
    const { verify, result } = await pending;
    expect(result).toMatchObject({ critical_error: 'cancelled', resolved: false, filter: true, reward: 0 });
    expect(verify.reward).toBe(0);
    expect(verify.swebench_metrics).toMatchObject({ critical_error: 'cancelled', filter: true });
  }, 60_000);

  it('/stop with a job in flight, then calls on a stopped server (503 with detail), then /start again', async () => {
    const pending = gymRun(srv.url, gymRequest(sweRow(fx, 'slow', { instance_id: 'acme__calc-stop' })));
    await until(async () => (await request(`${srv.url}/jobs/acme__calc-stop`)).body?.state === 'run', 'the slow job in RUN', 20_000);
    const stop = await postJson(`${srv.url}/stop`, {});
    expect(stop.status).toBe(200); // ss:418-468
    // ProRL fails the held request with 500 "Server is stopping; job cancelled" (ss:428); raas answers
    // 200 with critical_error "cancelled" (diff "a job ended by /cancel or /stop"). Gym scores both 0.
    const inFlight = await pending;
    expect(inFlight.result).toMatchObject({ critical_error: 'cancelled' });
    expect(inFlight.verify.reward).toBe(0);

    // ServerNotRunningError → 503 {"detail": "Server is not running. Please start the server first."} (ss:339-344),
    // raised by /process (ss:596-598), /status (ss:481-484), /cancel (ss:510-512) and /stop (ss:421-423).
    const answers = [
      await postJson(`${srv.url}/process`, { instance: sweRow(fx, 'fix'), sampling_params: {}, job_id: 'acme__calc-1' }),
      await request(`${srv.url}/status`),
      await postJson(`${srv.url}/cancel`, { job_id: 'acme__calc-1' }),
      await postJson(`${srv.url}/stop`, {}),
    ];
    for (const a of answers) {
      expect(a.status).toBe(503);
      expect(a.body.detail).toMatch(/^Server is not running\. Please start the server first\./);
    }
    // Gym turns the 503 into a reward-0 rollout with critical_error "run" (gym run_prorl.py:195, app.py:413-438).
    const refused = await gymRun(srv.url, gymRequest(sweRow(fx, 'fix')));
    expect(refused.result).toBeUndefined();
    expect(refused.verify).toMatchObject({ reward: 0, patch_exists: 0, output: [] });
    expect(refused.verify.swebench_metrics).toMatchObject({ critical_error: 'run' });
    expect(String(refused.verify.swebench_metrics.error)).toMatch(/^ClientResponseError: 503/);

    // /start on a stopped server: 200 (ss:402-412); /stop does not forget the backends (ss:539-541).
    expect((await postJson(`${srv.url}/start`, {})).status).toBe(200);
    expect((await status()).backends).toHaveLength(1);
    // /add_llm_server answers 200 on a stopped server too (ss:539-543), so a Gym agent server that
    // comes up while raas is stopped starts it and registers as usual.
    expect((await postJson(`${srv.url}/stop`, {})).status).toBe(200);
    expect((await postJson(`${srv.url}/add_llm_server`, { address: endpoint })).status).toBe(200);
    expect(await initializeProrlServer(srv.url, endpoint)).toEqual(['started', 'registered']);

    // A wrong fix after the restart: the agent finished without error (success, so Gym's
    // patch_successfully_applied is 1) but the tests fail (resolved, hence reward, 0); filter false (nu:600-612).
    const wrong = await gymRun(srv.url, gymRequest(sweRow(fx, 'wrong', { instance_id: 'acme__calc-2' })));
    expect(wrong.result, JSON.stringify(wrong.verify.swebench_metrics)).toBeDefined();
    expect(wrong.result).toMatchObject({
      critical_error: null,
      success: true,
      resolved: false,
      filter: false,
      instance_id: 'acme__calc-2',
    });
    expect(wrong.verify).toMatchObject({ reward: 0, resolved: 0, patch_exists: 1, patch_successfully_applied: 1 });
    expect(String(wrong.result!.git_patch)).toContain('abs(a - b)');
  }, 90_000);
});
