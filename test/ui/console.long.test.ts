import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { type Browser, launch } from '../helpers/browser.js';
import { post } from '../server/helpers.js';

const TOKEN = 'browser-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const root = path.resolve(import.meta.dirname, '../..');
const math = readFileSync(path.join(root, 'configs/data/math.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));

/** RUN waits until the test lets it go, so the console can be watched while the job is in a stage. */
const gates = new Map<string, () => void>();
const held: AgentHandler<{ data_source?: string; instance_id?: string }> = {
  name: 'held',
  instance: z.looseObject({ data_source: z.string().optional(), instance_id: z.string().optional() }),
  async init() {
    return {};
  },
  async run(ctx) {
    await new Promise<void>((resolve, reject) => {
      gates.set(ctx.job.id, resolve);
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
    });
    throw new RangeError('the held job was let go and fell over');
  },
  async eval() {
    return { reward: 1, resolved: true };
  },
};

// The console in Debian's chromium against a real server (token, simulated vLLM backend).
describe('the console in a browser', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  let browser: Browser;

  beforeAll(async () => {
    sim = await startSim({ port: 0, seed: 5, datasets: [path.join(root, 'configs/data/math.jsonl')] });
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', token: TOKEN, llm: { backends: [{ address: sim.url }] }, console: { backend_metrics_s: 0.5 } },
      { handlers: [held] },
    );
    await Promise.all(
      math
        .slice(0, 6)
        .map((inst, k) =>
          post(
            `${srv.url}/process`,
            { instance: inst, job_id: `m-${k}`, sampling_params: { temperature: 1, max_tokens_per_turn: 256 } },
            auth,
          ),
        ),
    );
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await srv?.close();
    await sim?.close();
  });

  it('signs in with the token and shows stages, backends, throughput and jobs, updated as a job moves', async () => {
    const page = await browser.page();
    await page.goto(`${srv.url}/ui`);
    await page.waitForURL(/\/ui\/login$/);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#jobs tr[data-job="m-0"]');
    await page.waitForSelector('#live:text("live")');
    expect(await page.textContent('#server-status')).toBe('running');
    expect(await page.locator('#jobs tr[data-state=done]').count()).toBe(6);
    expect(await page.textContent(`#backends tr[data-backend="${sim.url}"]`)).toContain('healthy');

    // A job enters RUN: its row and the RUN stage move without a reload.
    const pending = post(`${srv.url}/process`, { instance: { data_source: 'held', instance_id: 'h1' }, job_id: 'held-1' }, auth);
    await page.waitForSelector('#jobs tr[data-job="held-1"][data-state=run]');
    await page.waitForSelector('[data-stage=run] [data-fig=busy]:text-matches("^1/")');
    // The engine's own figures, read from its /metrics.
    await expect.poll(() => page.textContent('#backends .hits'), { timeout: 10_000 }).toMatch(/\d%/);
    await browser.shot(page, 'console');
    gates.get('held-1')!();
    expect((await pending).body.critical_error).toBe('run');
    await page.waitForSelector('#jobs tr[data-job="held-1"][data-state=failed]');
    await page.waitForSelector('#event-log li:text-matches("held-1 failed: run")');
    await page.waitForSelector('[data-stage=run] [data-fig=busy]:text-matches("^0/")');

    // Filters: failed jobs only.
    await page.selectOption('#f-error', { value: 'any' });
    await page.waitForSelector('#jobs tbody tr >> nth=1', { state: 'detached' });
    expect(await page.getAttribute('#jobs tbody tr', 'data-job')).toBe('held-1');
    await page.selectOption('#f-error', { value: '' });
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  });

  it('keeps up with a burst of jobs: counts and rows agree with the server once it settles', async () => {
    const page = await browser.page();
    await page.goto(`${srv.url}/ui#/`);
    await page.waitForSelector('#live:text("live")');
    // 300 jobs, 2,100 events, as fast as the server takes them.
    await Promise.all(
      Array.from({ length: 300 }, (_, k) =>
        post(`${srv.url}/process`, { instance: { data_source: 'chat', instance_id: `c${k}`, pass_rate: 1 }, job_id: `burst-${k}` }, auth),
      ),
    );
    const counts = (await (await fetch(`${srv.url}/ui/api/jobs?limit=1`, { headers: auth })).json()).by_state;
    await expect.poll(() => page.textContent('#state-counts'), { timeout: 10_000 }).toContain(`done ${counts.done}`);
    expect(await page.locator('#jobs tr[data-job^="burst-"][data-state=done]').count()).toBe(300);
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  });

  it("opens a job from the list: turns, the grader's answer, stage timings, the token view with ids on hover", async () => {
    const page = await browser.page();
    await page.goto(`${srv.url}/ui#/`);
    await page.click('#jobs tr[data-job="m-0"] a');
    await page.waitForSelector('#turns .turn');
    expect(await page.locator('#turns .turn[data-role=system]').count()).toBe(1);
    expect(await page.locator('#turns .turn[data-role=assistant]').count()).toBeGreaterThan(0);
    expect(await page.textContent('#answer-compare')).toContain(math[0].answer);
    expect(await page.textContent('#timing')).toMatch(/run \d/);
    // The raw result, as the API answers it, with the page's session.
    const raw = await page.request.get(`${srv.url}${await page.getAttribute('a.raw', 'href')}`);
    expect(raw.status()).toBe(200);
    expect((await raw.json()).result.job_id).toBe('m-0');
    await browser.shot(page, 'job');
    // From a turn to its tokens.
    await page.click('#turns .turn[data-role=assistant] button.link');
    await page.waitForSelector('.token-line .tk-gen');
    await page.hover('.token-scroll .tk-gen >> nth=3');
    const tip = await page.textContent('.tooltip');
    expect(tip).toMatch(/id \d+ · position \d+/);
    expect(tip).toMatch(/generated · mask 1logprob -?\d/);
    await browser.shot(page, 'tokens', false);
    await page.click('button:text("by logprob")');
    await page.waitForSelector('.token-scroll .tk[style*="background"]');
    await browser.shot(page, 'tokens-logprob', false);
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  });

  it('shows a failed job with its critical error and traceback, and cancels a live one', async () => {
    const page = await browser.page();
    await page.goto(`${srv.url}/ui#/jobs/held-1`);
    await page.waitForSelector('#critical-error');
    expect(await page.textContent('#critical-error h3')).toBe('critical_error: run');
    expect(await page.textContent('#critical-error')).toContain('RangeError: the held job was let go and fell over');
    expect(await page.textContent('#critical-error .traceback')).toMatch(/at .*run/);
    expect(await page.textContent('#reward')).toBe('0');
    await browser.shot(page, 'job-failed');

    const pending = post(`${srv.url}/process`, { instance: { data_source: 'held', instance_id: 'h2' }, job_id: 'held-2' }, auth);
    await page.goto(`${srv.url}/ui#/jobs/held-2`);
    await page.waitForSelector('#live-state');
    await page.click('#cancel');
    expect((await pending).body.critical_error).toBe('cancelled');
    await page.waitForSelector('#critical-error h3:text("critical_error: cancelled")');
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  });
});
