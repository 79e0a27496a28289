import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Message } from '../../src/protocol/process.js';
import { TrajectoryBuilder } from '../../src/server/agent/trajectory.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { type Browser, launch } from '../helpers/browser.js';
import { post } from '../server/helpers.js';

const TURNS = 5_000;

/**
 * RUN returns a trajectory of 10,000 messages after the prompt (5,000 model turns, 5,000 tool
 * observations) and over 200,000 token ids, built as the agent builds one: real Qwen3 ids, the
 * template's observation ids, logprobs that vary by turn.
 */
const huge: AgentHandler<{ data_source?: string }> = {
  name: 'huge',
  instance: z.looseObject({ data_source: z.string().optional() }),
  async init() {
    return {};
  },
  async run(ctx) {
    const tok = ctx.tokenizer;
    const prompt: Message[] = [
      { role: 'system', content: 'You are a software engineer fixing a failing test.' },
      { role: 'user', content: 'The test suite fails: find the bug and fix it.' },
    ];
    const b = new TrajectoryBuilder(tok.renderPrompt(prompt));
    for (const m of prompt) b.addPromptMessage(m);
    const text =
      '<think>\nThe traceback points at the parser; I should read the file around the failing line before editing anything.\n</think>\n\n<tool_call>\n{"name": "execute_bash", "arguments": {"command": "sed -n 1,40p src/parser.py"}}\n</tool_call>';
    const ids = [...tok.encode(text), tok.eosId];
    for (let t = 0; t < TURNS; t++) {
      b.addModelTurn(
        { role: 'assistant', content: text },
        ids,
        ids.map((_, i) => -((i * 7 + t) % 23) / 5),
      );
      const obs: Message = { role: 'tool', content: `line ${t}: def parse(s): return s.split(",")`, tool_call_id: `call_${t}` };
      b.addObservation([obs], tok.observationIds([obs]));
    }
    return {
      messages: b.messages,
      tokens: {
        prompt_ids: b.prompt_ids,
        response_ids: b.response_ids,
        response_mask: b.response_mask,
        logprobs: b.logprobs,
        spans: b.spans,
      },
      finish_reason: 'max_iterations',
      artifacts: {},
      num_turns: TURNS,
    };
  },
  async eval() {
    return { reward: 0, resolved: false, details: { reason: 'the test still fails' } };
  },
};

// A 10,000-turn, 200,000-token trajectory in Debian's chromium: the page loads and scrolls with
// virtualised lists. Load times are printed (they are figures to watch, not asserted).
describe('a large trajectory in the browser', () => {
  let srv: RolloutServer;
  let browser: Browser;
  let tokens = 0;

  beforeAll(async () => {
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', llm: { backends: [{ address: 'http://127.0.0.1:9' }] }, timeout_s: 600 },
      { handlers: [huge], tokenizer: qwen3Tokenizer() },
    );
    const r = await post(`${srv.url}/process`, { instance: { data_source: 'huge' }, job_id: 'big' });
    expect(r.status).toBe(200);
    tokens = r.body.tokens.prompt_ids.length + r.body.tokens.response_ids.length;
    expect(r.body.messages.length).toBeGreaterThanOrEqual(10_000);
    expect(tokens).toBeGreaterThanOrEqual(200_000);
    browser = await launch();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await srv?.close();
  });

  it('draws the turns and the tokens within seconds, keeps the DOM small, and scrolls to the last turn', async () => {
    const page = await browser.page();
    const t0 = Date.now();
    await page.goto(`${srv.url}/ui#/jobs/big`);
    await page.waitForSelector('#turns .turn[data-role=assistant]', { timeout: 60_000 });
    const turnsMs = Date.now() - t0;
    const bytes = (await (await fetch(`${srv.url}/ui/api/jobs/big`)).text()).length;
    // Only the rows in view are in the document.
    expect(await page.locator('#turns .turn').count()).toBeLessThan(60);
    await browser.shot(page, 'large-turns', false);
    // The last turn, reached by scrolling the list to its end.
    for (let i = 0; i < 20; i++) {
      await page.evaluate(() => {
        const el = document.querySelector('#turns')!;
        el.scrollTop = el.scrollHeight;
      });
      await page.waitForTimeout(100);
      if ((await page.locator('#turns .turn:has-text("#10001")').count()) > 0) break;
    }
    await page.waitForSelector('#turns .turn:has-text("#10001")');
    const t1 = Date.now();
    await page.click('button[role=tab]:text-matches("Tokens")');
    await page.waitForSelector('.token-line .tk');
    const tokensMs = Date.now() - t1;
    expect(await page.locator('.token-scroll .tk').count()).toBeLessThan(10_000);
    expect(await page.textContent('#token-summary')).toContain(`${tokens} tokens`);
    await page.evaluate(() => {
      const el = document.querySelector('.token-scroll')!;
      el.scrollTop = el.scrollHeight;
    });
    await page.waitForSelector(`.token-line .tk[data-i="${tokens - 1}"]`);
    await browser.shot(page, 'large-tokens', false);
    console.log(
      `large trajectory: ${TURNS * 2 + 2} turns, ${tokens} tokens, ${(bytes / 1e6).toFixed(1)} MB of JSON: turns drawn ${turnsMs} ms after navigation, token view ${tokensMs} ms after its tab was opened`,
    );
    expect(browser.problems).toEqual({ console: [], errors: [], failed: [] });
  }, 120_000);
});
