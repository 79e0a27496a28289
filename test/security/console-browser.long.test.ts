// Red team against the console and `raas view` in Debian's chromium. Everything a rollout produces
// is hostile input drawn in an operator's browser: model text, thinking, tool-call names and
// arguments, observations (from a real bwrap sandbox), file names, instance and job ids, a
// handler's error and traceback, a hostile LLM backend's weight version and error body, and every
// string of a run directory. A string that turns into markup shows up as a request to the canary
// listener, a dialog or `window.__raas_pwned`. Then the attacks of other pages on the console:
// framing it (clickjacking Cancel), cancelling from another origin, signing the browser in as
// someone else, a DNS-rebinding page reading `raas view` or a token-less server, and the token of
// a sign-in link kept in the browser's history.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { startRunViewer, type RunViewer } from '../../src/ui/view-server.js';
import { type Browser, launch } from '../helpers/browser.js';
import { type Canary, hostile, hostileShort, startCanary, writeHostileRun } from './console-kit.js';
import { answered, bash, codeTask, create, finish, hex, startHarness, type Harness } from './helpers.js';
import { call } from '../agent/script-policy.js';

/** A handler whose run fails with a hostile message and stack, or waits until let go (for Cancel). */
const gates = new Map<string, () => void>();
const HostileInstance = z.looseObject({
  data_source: z.string().optional(),
  instance_id: z.string().optional(),
  hold: z.boolean().optional(),
  message: z.string().optional(),
});
const hostileHandler: AgentHandler<z.infer<typeof HostileInstance>> = {
  name: 'rt_hostile',
  instance: HostileInstance,
  async init() {
    return {};
  },
  async run(ctx) {
    if (ctx.job.instance.hold)
      await new Promise<void>((resolve, reject) => {
        gates.set(ctx.job.id, resolve);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
      });
    const message = ctx.job.instance.message ?? 'let go';
    const err = new Error(message);
    err.stack = `Error: ${message}\n    at ${message} (file:///${message}:1:1)`;
    throw err;
  },
  async eval() {
    return { reward: 1 };
  },
};

/** A hostile LLM backend: every route answers 500 with a JSON error whose message is hostile. */
async function startHostileBackend(text: string): Promise<{ url: string; close(): Promise<void> }> {
  const srv = http.createServer((req, res) => {
    req.resume();
    const body = req.url?.startsWith('/metrics')
      ? `# HELP ${text}\nvllm:num_requests_running{model="${text}"} 1\n`
      : JSON.stringify({ error: { message: text, type: text } });
    res.writeHead(req.url?.startsWith('/metrics') ? 200 : 500, {
      'content-type': req.url?.startsWith('/metrics') ? 'text/plain' : 'application/json',
    });
    res.end(body);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`,
    close: () =>
      new Promise((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

/** Another site: serves fixed pages on 127.0.0.1 (same site as the console, another origin). */
async function startSite(pages: Record<string, string>): Promise<{ port: number; close(): Promise<void> }> {
  const srv = http.createServer((req, res) => {
    const page = pages[(req.url ?? '/').split('?')[0]!];
    res.writeHead(page === undefined ? 404 : 200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(page ?? 'no');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    port: (srv.address() as { port: number }).port,
    close: () =>
      new Promise((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

/** What a page did that only script or injected markup can do. */
interface Executed {
  dialogs: string[];
  pwned: unknown;
}

/** Watches a page for dialogs (and dismisses them). */
function watchDialogs(page: Page): string[] {
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss().catch(() => undefined);
  });
  return dialogs;
}

async function executed(page: Page, dialogs: string[]): Promise<Executed> {
  const pwned = await page.evaluate(() => (window as unknown as { __raas_pwned?: unknown }).__raas_pwned).catch(() => 'page gone');
  return { dialogs: [...dialogs], pwned };
}

/** The page's whole text (collapsed parts included): proves a hostile field was drawn, as text. */
const pageText = (page: Page): Promise<string> => page.evaluate(() => document.body.textContent ?? '');

/**
 * The text of a trajectory page's turns, every one of them: the list is virtualised, so its box is
 * made tall enough to hold them all, and each folded thinking block and clamped text is opened.
 */
async function turnsText(page: Page): Promise<string> {
  await page.evaluate(() => {
    const el = document.getElementById('turns');
    if (el) el.style.maxHeight = el.style.height = '100000px';
  });
  await page.waitForTimeout(200);
  await page.evaluate(() => {
    for (const d of document.querySelectorAll('#turns details')) (d as HTMLDetailsElement).open = true;
    for (const b of document.querySelectorAll('#turns button.link'))
      if (b.textContent?.startsWith('show all')) (b as HTMLButtonElement).click();
  });
  await page.waitForTimeout(200);
  return pageText(page);
}

/** Opens the token view of a trajectory page and hovers a few tokens; returns the page's text then. */
async function tokensText(page: Page): Promise<string> {
  const toTokens = page.locator('#turns .turn button.link:text-matches("^tokens")').first();
  if ((await toTokens.count()) === 0) return '';
  await toTokens.click();
  await page.waitForSelector('.token-line');
  const n = await page.locator('.token-scroll .tk').count();
  for (const k of [1, 5, 20].filter((i) => i < n)) await page.hover(`.token-scroll .tk >> nth=${k}`, { timeout: 2000 });
  return pageText(page);
}

describe('hostile rollout content in the console (a real bwrap sandbox, a hostile backend, a failing handler)', () => {
  let h: Harness;
  let canary: Canary;
  let browser: Browser;
  let bad: { url: string; close(): Promise<void> };
  const jobs: Record<string, string> = {};
  const markers: string[] = [];

  beforeAll(async () => {
    canary = await startCanary();
    const x = (field: string): string => {
      const v = hostile(canary.url, field);
      markers.push(v.marker);
      return v.text;
    };
    h = await startHarness('console-xss', { handlers: [hostileHandler] });

    // 1. A code task whose model writes hostile thinking, text, tool names and arguments, and whose
    // observations (a file's content, a file name listed by ls) come back hostile from the sandbox.
    const fileName = `<img src=x onerror="window.__raas_pwned='file-name';alert('file-name')">`;
    const steps = [
      `<think>${x('thinking')}</think>${x('assistant-text')}\n${create('/workspace/page.txt', x('observation'))}`,
      `${x('assistant-text-2')}\n${bash(`cat /workspace/page.txt; touch '/workspace/${fileName.replaceAll("'", "'\\''")}'; ls /workspace | cat`)}`,
      call(hostileShort(canary.url, 'tool-name').text, { [x('tool-arg-key')]: x('tool-arg-value') }),
      finish(x('finish-message')),
    ];
    const marker = h.script('xss-code', steps);
    jobs.code = `xss-${hostileShort(canary.url, 'job_id').text}`;
    const inst = { ...codeTask(marker), instance_id: hostileShort(canary.url, 'instance_id').text };
    answered(await h.process({ instance: inst, job_id: jobs.code }));

    // 2. A handler that fails with a hostile error and traceback.
    jobs.failed = `xss-failed-${hex(3)}`;
    const failed = await h.process({ instance: { data_source: 'rt_hostile', instance_id: 'f', message: x('error') }, job_id: jobs.failed });
    expect(failed.body?.critical_error).toBe('run');

    // 3. A hostile backend: its weight version, its error body (the job's error and the backend's
    // last_error) and its /metrics.
    bad = await startHostileBackend(x('backend-error'));
    const auth = { authorization: `Bearer ${h.secrets.token}`, 'content-type': 'application/json' };
    const add = await fetch(`${h.url}/add_llm_server`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ address: bad.url, probe: false, weight_version: hostileShort(canary.url, 'weight_version').text }),
    });
    expect(add.status).toBe(200);
    await fetch(`${h.url}/remove_llm_server`, { method: 'POST', headers: auth, body: JSON.stringify({ address: h.sim.url }) });
    jobs.backend = `xss-backend-${hex(3)}`;
    const viaBad = await h.process({ instance: codeTask(h.script('xss-backend', [finish()])), job_id: jobs.backend });
    expect(viaBad.body?.critical_error, viaBad.text.slice(0, 400)).toBeTruthy();
    browser = await launch();
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    await bad?.close();
    await canary?.close();
  });

  it('draws every hostile field as text: no script runs, no markup loads anything, no dialog opens', async () => {
    const page = await browser.page();
    const dialogs = watchDialogs(page);
    await page.goto(`${h.url}/ui`);
    await page.waitForURL(/\/ui\/login$/);
    await page.fill('input[name=token]', h.secrets.token);
    await page.click('button[type=submit]');
    await page.waitForSelector(`#jobs tr[data-job="${jobs.failed}"]`);
    await page.waitForSelector(`#backends tr[data-backend="${bad.url}"]`);
    await page.waitForTimeout(1500);
    const seen = [await pageText(page)];
    for (const id of Object.values(jobs)) {
      await page.goto(`${h.url}/ui#/jobs/${encodeURIComponent(id)}`);
      await page.waitForSelector('#reward');
      seen.push(await turnsText(page), await tokensText(page));
    }
    const all = seen.join('\n');
    // The hostile strings reached the pages (the attack was drawn, as text).
    for (const m of [
      'RTXSS-assistant-text',
      'RTXSS-observation',
      'RTXSS-tool-arg-value',
      'RTXSS-error',
      'RTXSS-backend-error',
      'RTXSS-job_id',
      'RTXSS-instance_id',
      'RTXSS-weight_version',
    ])
      expect(all, `${m} was never drawn`).toContain(m);
    expect(all).toContain("onerror=\"window.__raas_pwned='file-name'");
    await page.waitForTimeout(1000);
    expect(await executed(page, dialogs)).toEqual({ dialogs: [], pwned: undefined });
    expect(canary.hits, 'hostile markup made requests').toEqual([]);
  }, 120_000);
});

describe('a hostile run directory in raas view', () => {
  let canary: Canary;
  let view: RunViewer;
  let browser: Browser;
  let run: ReturnType<typeof writeHostileRun>;
  // Made when the tests run (a describe whose tests are all filtered out runs no hook to remove it).
  let tmp: string;

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rt-viewxss-'));
    canary = await startCanary();
    run = writeHostileRun(tmp, canary.url);
    view = await startRunViewer({ dir: run.dir, tokenizer: qwen3Tokenizer });
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await view?.close();
    await canary?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('draws the run, a step and every rollout with no script, no load and no dialog from its files', async () => {
    const page = await browser.page();
    const dialogs = watchDialogs(page);
    const seen: string[] = [];
    await page.goto(`${view.url}/ui`);
    await page.waitForSelector('#steps tr[data-step="0"]');
    seen.push(await pageText(page));
    await page.goto(`${view.url}/ui#/steps/0`);
    await page.waitForSelector('tr[data-job="plain-job"]');
    seen.push(await pageText(page));
    const rejected = (await page.locator('tr[data-job^="rej-"]').getAttribute('data-job')) ?? '';
    for (const job of [...run.jobs, rejected]) {
      await page.goto(`${view.url}/ui#/rollouts/0/${encodeURIComponent(job)}`);
      await page.waitForSelector('#reward, .errorbox');
      const failed = await page.locator('.errorbox').allTextContents();
      expect(failed, `the rollout page of ${job} failed`).toEqual([]);
      seen.push(await turnsText(page), await tokensText(page));
    }
    const all = seen.join('\n');
    for (const m of [
      'RTXSS-run-answer',
      'RTXSS-run-observation',
      'RTXSS-run-tool-arg',
      'RTXSS-run-error',
      'RTXSS-run-group_id',
      'RTXSS-run-job_id',
      'RTXSS-run-rejected-error',
    ])
      expect(all, `${m} was never drawn`).toContain(m);
    expect(all).toContain("window.__raas_pwned='dirname'");
    await page.waitForTimeout(1000);
    expect(await executed(page, dialogs)).toEqual({ dialogs: [], pwned: undefined });
    expect(canary.hits, 'hostile markup made requests').toEqual([]);
  }, 120_000);
});

describe('other pages against the console: framing, cross-origin Cancel, sign-in CSRF, DNS rebinding, the history', () => {
  const TOKEN = `browser-rt-${hex(8)}`;
  let sim: SimHandle;
  let srv: RolloutServer;
  let open: RolloutServer;
  let view: RunViewer;
  let browser: Browser;
  // Made when the tests run (a describe whose tests are all filtered out runs no hook to remove it).
  let tmp: string;
  const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const state = async (id: string): Promise<string> =>
    ((await (await fetch(`${srv.url}/jobs/${id}`, { headers: auth })).json()) as { state: string }).state;
  /** Starts a job that waits in RUN until let go; resolves once it is there (with the job's answer to come). */
  const hold = async (id: string): Promise<{ done: Promise<unknown> }> => {
    const done = fetch(`${srv.url}/process`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ instance: { data_source: 'rt_hostile', instance_id: id, hold: true }, job_id: id }),
    }).then((r) => r.json());
    await expect.poll(() => state(id), { timeout: 10_000 }).toBe('run');
    return { done };
  };
  const signIn = async (page: Page): Promise<void> => {
    await page.goto(`${srv.url}/ui/login`);
    await page.fill('input[name=token]', TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#live:text("live")');
  };

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rt-pages-'));
    sim = await startSim({ seed: 1 });
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', token: TOKEN, llm: { backends: [{ address: sim.url }] } },
      { handlers: [hostileHandler] },
    );
    open = await startRolloutServer({ port: 0, log_level: 'silent' });
    fs.mkdirSync(path.join(tmp, 'run', 'batches'), { recursive: true });
    fs.writeFileSync(
      path.join(tmp, 'run', 'metrics.jsonl'),
      `${JSON.stringify({ step: 0, policy_version: 0, wall_s: 1, secret_metric: 'RTREBIND' })}\n`,
    );
    view = await startRunViewer({ dir: path.join(tmp, 'run'), tokenizer: qwen3Tokenizer });
    // rebind.test stands for an attacker's name that their DNS points at 127.0.0.1 once the page loaded.
    browser = await launch({ args: ['--host-resolver-rules=MAP rebind.test 127.0.0.1'] });
  });
  afterAll(async () => {
    for (const g of gates.values()) g();
    await browser?.close();
    await view?.close();
    await open?.close();
    await srv?.close();
    await sim?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  // A page of the same site (127.0.0.1 on another port: the cookie goes along) framing the signed-in
  // console would get its Cancel clicked by a lure.
  it('cannot be framed by another page (clickjacking Cancel)', async () => {
    const page = await browser.page();
    await signIn(page);
    const id = `frame-${hex(3)}`;
    const pending = await hold(id);
    const site = await startSite({
      '/': `<h1>win a prize</h1><iframe id="f" src="${srv.url}/ui#/jobs/${id}" width="1200" height="900"></iframe>`,
    });
    try {
      await page.goto(`http://127.0.0.1:${site.port}/`);
      await page.waitForTimeout(3000);
      const framed = page.frames().filter((f) => f !== page.mainFrame());
      const cancels = await Promise.all(
        framed.map((f) =>
          f
            .locator('#cancel')
            .count()
            .catch(() => 0),
        ),
      );
      expect(
        cancels.reduce((a, b) => a + b, 0),
        'the framed console shows its Cancel button',
      ).toBe(0);
    } finally {
      await site.close();
      gates.get(id)?.();
      await pending.done;
    }
  });

  it("cannot be made to cancel a job by another origin's page, whatever it sends", async () => {
    const page = await browser.page();
    await signIn(page);
    const id = `csrf-${hex(3)}`;
    const pending = await hold(id);
    const body = JSON.stringify({ job_id: id });
    const attack = `<script>
      fetch(${JSON.stringify(`${srv.url}/cancel`)}, { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: ${JSON.stringify(body)} });
      fetch(${JSON.stringify(`${srv.url}/cancel`)}, { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' }, body: ${JSON.stringify(body)} }).catch(() => {});
      navigator.sendBeacon(${JSON.stringify(`${srv.url}/cancel`)}, new Blob([${JSON.stringify(body)}], { type: 'application/json' }));
      setTimeout(() => document.getElementById('f').submit(), 500);
    </script>
    <form id="f" method="POST" action="${srv.url}/cancel" enctype="text/plain"><input name='{"job_id":"${id}","x":"' value='"}'></form>`;
    const site = await startSite({ '/': attack });
    try {
      for (const origin of [`http://127.0.0.1:${site.port}`, `http://localhost:${site.port}`]) {
        await page.goto(`${origin}/`);
        await page.waitForTimeout(1500);
        expect(await state(id), `after ${origin}'s page`).toBe('run');
      }
    } finally {
      await site.close();
      gates.get(id)?.();
      await pending.done;
    }
  });

  it("is not signed in by another site's sign-in form (sign-in CSRF)", async () => {
    const page = await browser.page();
    await browser.context.clearCookies();
    const site = await startSite({
      '/': `<form id="f" method="POST" action="${srv.url}/ui/login"><input name="token" value="${TOKEN}"></form><script>document.getElementById('f').submit()</script>`,
    });
    try {
      await page.goto(`http://localhost:${site.port}/`);
      await page.waitForTimeout(1500);
      const cookies = await browser.context.cookies(srv.url);
      expect(
        cookies.map((c) => c.name),
        "another site's form signed the browser in",
      ).toEqual([]);
    } finally {
      await site.close();
    }
  });

  // DEFECT (by design of sign-in links): a page of another site that navigates the browser to
  // /ui?token=<its own token> signs the browser in as that token (on a server with tenants: the
  // attacker's tenant, whose console the victim then uses). Nothing tells a link the user was given
  // from one another site sent them to.
  it.fails("is not signed in by another site's link carrying a token", async () => {
    const page = await browser.page();
    await browser.context.clearCookies();
    const site = await startSite({ '/': `<script>location = ${JSON.stringify(`${srv.url}/ui?token=${TOKEN}`)}</script>` });
    try {
      await page.goto(`http://localhost:${site.port}/`);
      await page.waitForTimeout(1500);
      const cookies = await browser.context.cookies(srv.url);
      expect(
        cookies.map((c) => c.name),
        "another site's link signed the browser in",
      ).toEqual([]);
    } finally {
      await site.close();
    }
  });

  // raas view (no authentication) and raas serve without a token: a page of another site whose name
  // the attacker's DNS rebinds to 127.0.0.1 is same-origin with them in the browser.
  it('is not readable by a DNS-rebinding page: raas view and a token-less raas serve', async () => {
    const page = await browser.page();
    await page.goto(`http://rebind.test:${new URL(view.url).port}/ui`).catch(() => undefined);
    const read = await page
      .evaluate(() =>
        fetch('/ui/api/run')
          .then((r) => r.text())
          .catch((e: Error) => e.message),
      )
      .catch(() => '');
    expect(read, 'the rebinding page read the run').not.toContain('RTREBIND');
    await page.goto(`http://rebind.test:${new URL(open.url).port}/ui`).catch(() => undefined);
    const paused = await page
      .evaluate(() =>
        fetch('/pause', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
          .then((r) => r.status)
          .catch(() => 0),
      )
      .catch(() => 0);
    expect(paused, 'the rebinding page paused the server').not.toBe(200);
  });

  // DEFECT: a sign-in link is answered with a redirect, but chromium records the redirecting URL
  // (with the token) in its history database, where the address bar's suggestions find it.
  it.fails("keeps a sign-in link's token out of the browser's history", async () => {
    const own = await launch();
    try {
      const page = await own.page();
      await page.goto(`${srv.url}/ui?token=${TOKEN}`);
      await page.waitForSelector('#live:text("live")');
      await page.waitForTimeout(500);
      await own.context.close();
      const urls = execFileSync(
        'python3',
        [
          '-c',
          'import sqlite3,sys; print("\\n".join(u for (u,) in sqlite3.connect(sys.argv[1]).execute("select url from urls")))',
          path.join(own.profile, 'Default', 'History'),
        ],
        { encoding: 'utf8' },
      );
      expect(
        urls.split('\n').filter((u) => u.includes(TOKEN)),
        "the token is in the browser's history",
      ).toEqual([]);
    } finally {
      await own.close().catch(() => undefined);
    }
  });
});
