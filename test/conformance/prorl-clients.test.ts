import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { postJson, request, serveProcess, tempDir, type Answer, type ServeProcess } from '../reliability/helpers/servers.js';
import { conformancePolicy, makeSweFixture, sandboxRoot, serverConfig, sweRow, type SweFixture } from './fixture.js';

// ProRL Agent Server's own HTTP clients replayed against `raas serve` run as a process, as
// run_swe.py runs start_server.py: their request sequences, and what they read from the answers.
// Sources (NVIDIA-NeMo/ProRL-Agent-Server@40c1d8a), cited per expectation:
//   ts   = scripts/tests/test_server.py           tst = scripts/tests/test_server_token.py
//   tas  = scripts/tests/test_async_server.py      (its result checks; it drives the server in-process)
//   swe  = scripts/run_swe.py                      math = scripts/run_math.py
//   pb   = scripts/profile/profile_batch.py        (OpenHandsBatchProcessor; cited by method name)
//   ss   = scripts/start_server.py                 nu = openhands/nvidia/utils.py
//   asp  = openhands/nvidia/async_server_process.py
//   diff "<row>" = the row of docs/api.md's "Differences from ProRL Agent Server" table.
// The tests are one sequence on one server (the last one SIGTERMs it): run the file whole.

/** The sampling params every ProRL script sends (swe:15-24, ts:110-119): LiteLLM's model name, an api key, OpenHands' LLMConfig keys. */
const PRORL_SAMPLING = {
  model: 'hosted_vllm/Qwen/Qwen3-8B',
  api_key: 'mykey',
  modify_params: false,
  log_completions: false,
  native_tool_calling: true,
  temperature: 0.6,
  top_p: 0.9,
  max_iterations: 35,
};

/** ProRL's scripts read the answers of /start, /stop, /status, /add_llm_server as 200 + JSON (ts:31-36, 44-49, 57-62, 71-76; swe:29-32). */
function ok(a: Answer): void {
  expect(a.status, a.text).toBe(200);
  expect(a.body).not.toBeNull();
}

describe('ProRL Agent Server scripts against `raas serve` (process + simulated vLLM + bwrap + repos_dir)', () => {
  let fx: SweFixture;
  let sim: SimHandle;
  let srv: ServeProcess;
  let url: string;
  let dir: string;
  const root = sandboxRoot('prorl');

  beforeAll(async () => {
    fx = makeSweFixture();
    dir = tempDir('conformance');
    sim = await startSim({ seed: 2 }, { policies: [conformancePolicy] });
    // JSON is YAML: the operator's config, with the mirror and the sandbox root.
    const config = path.join(dir, 'server.yaml');
    fs.writeFileSync(config, JSON.stringify(serverConfig(fx, root)));
    // run_swe.py launches start_server.py --port <p> --timeout 500 (swe:131-137).
    srv = await serveProcess(['--config', config, '--timeout', '500', '--log-level', 'warn']);
    url = srv.url;
  }, 90_000);
  afterAll(async () => {
    await srv?.kill('SIGKILL');
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    fx?.remove();
  });

  /** POST without a body, as aiohttp's session.post(url) and _post(url, None) send /start, /stop, /clear_llm_server (ts:30, swe:29-32). */
  const bare = (route: string) => request(`${url}${route}`, { method: 'POST' });
  /** One /process as the scripts send it: {instance, sampling_params}, no job_id (ts:82, swe:50). */
  const processRequest = (instance: unknown, sampling: Record<string, unknown>) =>
    postJson(`${url}/process`, { instance, sampling_params: sampling }, { timeoutMs: 120_000 });

  it("run_swe.py's launcher: the server is ready once GET /status answers 200 or 503", async () => {
    // swe:142-156 polls /status and accepts 200 (running) or 503 (stopped).
    expect([200, 503]).toContain((await request(`${url}/status`)).status);
  });

  it('test_server.py: add_llm_server once, then start → status → n concurrent /process → stop, twice', async () => {
    // ts:99-100 (start_server_api), once before both rounds (ts:145, 150, 159).
    ok(await postJson(`${url}/add_llm_server`, { address: `${sim.url}/v1` }));
    for (const numTasks of [1, 4]) {
      // ts:103-130: process(); the second round starts a server the first round stopped (ss:402-412),
      // whose backend the stop kept (ss:539-541).
      ok(await bare('/start'));
      const st = await request(`${url}/status`);
      ok(st);
      expect(st.body).toMatchObject({ status: 'running', running: true });
      const instance = sweRow(fx, 'fix');
      // ts:110-119 (max_iterations 1), ts:120-122 (a copy with trajectory_id = i), ts:125 (gather).
      const answers = await Promise.all(
        Array.from({ length: numTasks }, (_, i) =>
          processRequest({ ...instance, trajectory_id: i }, { ...PRORL_SAMPLING, max_iterations: 1 }),
        ),
      );
      ok(await bare('/stop')); // ts:128
      for (const [i, a] of answers.entries()) {
        expect(a.status, a.text).toBe(200); // ts:85
        const r = a.body;
        // ts:88-89 take len() of messages and tools; ts:155, 163 assert no critical error.
        expect(Array.isArray(r.messages) && Array.isArray(r.tools)).toBe(true);
        expect(r.critical_error, r.error).toBeNull();
        // tas:184-195 (its result check): messages is a list ending with an assistant message.
        expect(r.messages.at(-1).role).toBe('assistant');
        // nu:580-594: trajectory_id copied from the instance, here an integer.
        expect(r.trajectory_id).toBe(i);
        // One LLM turn (max_iterations 1): the first turn's two tool calls, nothing graded as solved.
        expect(r.messages.filter((m: { role: string }) => m.role === 'assistant')).toHaveLength(1);
        expect(r.resolved).toBe(false);
      }
      // Without a job_id every request gets its own (ss:608).
      expect(new Set(answers.map((a) => a.body.job_id)).size).toBe(numTasks);
    }
  }, 120_000);

  it('test_server_token.py: an address without /v1, token_level_generation; token fields on the assistant messages', async () => {
    ok(await postJson(`${url}/add_llm_server`, { address: sim.url })); // tst:106-107
    ok(await bare('/start'));
    ok(await request(`${url}/status`));
    // tst:117-130: token_level_generation, custom_tokenizer, max_output_tokens, max_model_len.
    const sampling = {
      ...PRORL_SAMPLING,
      token_level_generation: true,
      custom_tokenizer: 'Qwen/Qwen3-8B',
      max_output_tokens: 4096,
      max_model_len: 32768,
    };
    const answers = await Promise.all([0, 1].map((i) => processRequest({ ...sweRow(fx, 'fix'), trajectory_id: i }, sampling)));
    ok(await bare('/stop'));
    for (const a of answers) {
      expect(a.status, a.text).toBe(200);
      const r = a.body;
      expect(r.critical_error, r.error).toBeNull();
      expect(r.resolved).toBe(true);
      // tst:90-96 read, for each message: len(content), len(tool_calls) and len(input_ids) when present, len(token_ids).
      for (const m of r.messages) {
        expect(typeof m.content).toBe('string');
        if (m.tool_calls != null) expect(Array.isArray(m.tool_calls)).toBe(true);
        if (m.role === 'assistant') {
          expect(m.token_ids.length).toBeGreaterThan(0);
          expect(m.logprobs).toHaveLength(m.token_ids.length);
          expect(m.input_ids.length).toBeGreaterThan(0);
        } else {
          // ProRL puts token_ids on every message, re-tokenising the others (nu:309-325), so tst:95 reads
          // them everywhere; raas puts them on assistant messages only (diff "token_level_generation").
          expect(m).not.toHaveProperty('token_ids');
        }
      }
    }
  }, 120_000);

  it("profile_batch.py's OpenHandsBatchProcessor: clear_llm_server, add_llm_server, start, /process (retried only on an empty answer), stop", async () => {
    // pb _send_llm_addresses_to_openhands: clear, then add http://<ip:port>/v1 (_send_addresses_async).
    ok(await bare('/clear_llm_server'));
    ok(await postJson(`${url}/add_llm_server`, { address: `http://127.0.0.1:${sim.port}/v1` }));
    ok(await bare('/start')); // pb _start_single_server: 200 or it raises
    // pb __init__ sampling params; pb _send_single_message_to_openhands retries a non-200 or an empty messages list.
    const sampling = { ...PRORL_SAMPLING, model: 'hosted_vllm/Qwen/Qwen3-14B', top_p: 0.95, max_output_tokens: 3072 };
    const answers = await Promise.all([0, 1].map((i) => processRequest({ ...sweRow(fx, 'wrong'), trajectory_id: i }, sampling)));
    ok(await bare('/stop')); // pb _stop_single_server
    for (const a of answers) {
      expect(a.status, a.text).toBe(200);
      expect(a.body.messages.length).toBeGreaterThan(0); // no retry needed
      // pb main: len(result.get('git_patch', '')).
      expect(typeof a.body.git_patch).toBe('string');
      expect(a.body.git_patch).toContain('abs(a - b)');
      expect(a.body).toMatchObject({ critical_error: null, resolved: false, success: true, filter: false });
    }
  }, 120_000);

  it('run_math.py: deepscaler rows in veRL form; the printed count of resolved rows', async () => {
    const row = (k: number, said: number) => ({
      data_source: 'deepscaler',
      prompt: [
        {
          role: 'user',
          content: `What is $17 \\times 23$? Let's think step by step and output the final answer within \\boxed{}. ANSWER:${said}`,
        },
      ],
      ability: 'math',
      reward_model: { style: 'rule', ground_truth: '391' },
      extra_info: { split: 'train', index: k },
      trajectory_id: k, // math:63
    });
    ok(await postJson(`${url}/add_llm_server`, { address: `${sim.url}/v1` })); // math:77-78, raise_for_status (math:31)
    ok(await bare('/start')); // math:79
    const answers = await Promise.all([row(0, 391), row(1, 7)].map((r) => processRequest(r, PRORL_SAMPLING))); // math:66, 84-88
    ok(await bare('/stop')); // math:104
    for (const a of answers) expect(a.status, a.text).toBe(200);
    // math:112 prints sum(r.get("resolved")): resolved is a boolean per row.
    const results = answers.map((a) => a.body);
    for (const r of results) expect(typeof r.resolved).toBe('boolean');
    expect(results.map((r) => [r.trajectory_id, r.resolved, r.critical_error])).toEqual([
      [0, true, null],
      [1, false, null],
    ]);
  }, 120_000);

  it('run_swe.py: add_llm_server, start, /process under a semaphore, stop, then SIGTERM ends the server within 10 s', async () => {
    ok(await postJson(`${url}/add_llm_server`, { address: `${sim.url}/v1` })); // swe:74-75
    ok(await bare('/start')); // swe:76; raise_for_status (swe:31)
    // swe:59-64: the row's instance with trajectory_id = its index; swe:78-84: at most `concurrency` at once.
    // These rows name their data source, which ProRL also reads as the default (asp:774).
    const rows = [sweRow(fx, 'fix'), sweRow(fx, 'wrong'), sweRow(fx, 'fix')].map((r, idx) => ({
      ...r,
      data_source: 'swebench',
      trajectory_id: idx,
    }));
    const results: any[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < rows.length) {
        const a = await processRequest(rows[next++], PRORL_SAMPLING);
        ok(a); // swe:31: raise_for_status, else the worker records critical_error str(e) (swe:85-91)
        results.push(a.body);
      }
    };
    await Promise.all([worker(), worker()]);
    ok(await bare('/stop')); // swe:101
    // swe:109: "Resolved", sum(r.get("resolved")).
    expect(results.reduce((s, r) => s + Number(r.resolved), 0)).toBe(2);
    expect(results.map((r) => r.trajectory_id).sort()).toEqual([0, 1, 2]);
    // swe:163-175: SIGTERM to the process group, then wait(timeout=10) before a kill.
    const t0 = Date.now();
    const exit = await srv.kill('SIGTERM');
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(exit).toEqual({ code: 0, signal: null });
  }, 120_000);
});
