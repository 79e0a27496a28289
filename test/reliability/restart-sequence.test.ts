// The sequence a trainer runs between weight syncs against a live server (NeMo-Gym's ProRL
// client and veRL's agent loop do it this way): /stop → /clear_llm_server → /add_llm_server →
// /start, then /process at once. Replayed ten times against a server with real bwrap sandboxes and
// a warm pool: the first job after every /start runs like any other (no critical_error), and
// nothing of the stopped jobs is left in /status.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bash, codeTask, create, finish, startHarness, summary, type Harness } from '../security/helpers.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('restart', { sandbox: { pool_size: 2 } });
}, 120_000);
afterAll(() => h?.close());

const post = async (route: string, body: unknown = {}): Promise<{ status: number; json: any }> => {
  const res = await fetch(`${h.url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${h.secrets.token}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
};

const get = async (route: string): Promise<{ status: number }> => {
  const res = await fetch(`${h.url}${route}`, { headers: { authorization: `Bearer ${h.secrets.token}` } });
  await res.body?.cancel();
  return { status: res.status };
};

describe('stop, swap the backend, start, process', () => {
  it('ten replays: every first job after /start is graded, /status counts nothing left', async () => {
    const solve = h.script('restart-solve', [
      create('/workspace/solution.py', 'a, b = map(int, input().split())\nprint(a + b)\n'),
      bash('python3 solution.py <<< "2 3"'),
      finish(),
    ]);
    const slow = h.script('restart-slow', [bash('sleep 30', 40), finish()]);
    const failures: string[] = [];
    for (let i = 0; i < 10; i++) {
      // A job in flight when the trainer stops the server: cancelled, answered.
      const inFlight = h.process({ instance: codeTask(slow), job_id: `restart-slow-${i}` }, 60_000);
      // Stopped once the server holds it (a loaded machine may take longer than any fixed pause).
      for (let t = 0; t < 200 && (await get(`/jobs/restart-slow-${i}`)).status !== 200; t++) await new Promise((r) => setTimeout(r, 25));
      expect((await post('/stop')).status).toBe(200);
      expect((await inFlight).status).toBe(200);
      expect((await post('/clear_llm_server')).status).toBe(200);
      expect((await post('/add_llm_server', { address: h.sim.url })).status).toBe(200);
      expect((await post('/start')).json.status).toBe('running');
      const a = await h.process({ instance: codeTask(solve), job_id: `restart-first-${i}` }, 60_000);
      const r = a.body;
      if (a.status !== 200 || r?.critical_error !== null || r?.reward !== 1) failures.push(`replay ${i}: ${a.status} ${summary(r)}`);
    }
    expect(failures).toEqual([]);
    const status = await h.get('/status');
    expect(status).toMatchObject({ status: 'running', jobs: 0, in_stage: 0, queued: 0 });
  }, 300_000);
});
