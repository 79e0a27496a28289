// Faults of real bwrap sandboxes under a job (rel-sandbox handler, loaded by path): the sandbox
// SIGKILLed from outside, its tool server crashing, its workspace filling up (sandbox root on a
// size-limited tmpfs). The job ends with a critical_error in bounded time, the workspace is removed,
// nothing of the sandbox stays in the process table, and the server keeps serving.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { rootTag } from '../../src/server/sandbox/runtimes/bwrap.js';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutServer } from '../../src/server/index.js';
import { observe } from './helpers/observe.js';
import {
  descendantsOf,
  inNamespaces,
  isToolServer,
  pidNs,
  processTable,
  waitGone,
  withCommand,
  workspaceCount,
  type Proc,
} from '../helpers/procs.js';
import { inProcessServer, postJson, request, sandboxRoot, until } from './helpers/servers.js';

const isRoot = process.getuid?.() === 0;
/** rel-sandbox never calls the LLM, but /process needs a registered backend (503 no_llm_backends otherwise). */
const NO_LLM = 'http://127.0.0.1:9';

/** bwrap processes of our sandbox root (outer ones and their pid-1 copies inside the namespace), named on their argv by the root's tag. */
function bwraps(root: string): Proc[] {
  return withCommand(rootTag(root)).filter((p) => /(^|\/)bwrap /.test(p.cmd));
}

/** The outer bwrap of each open sandbox: started by this (in-process) server. */
function outerBwraps(root: string): Proc[] {
  return bwraps(root).filter((p) => p.ppid === process.pid);
}

async function sandboxOfJob(root: string): Promise<{ outer: Proc; ns: string; tree: Proc[] }> {
  await until(
    () => outerBwraps(root).length === 1 && descendantsOf(outerBwraps(root)[0].pid).some(isToolServer),
    "the job's sandbox running",
    20_000,
  );
  const outer = outerBwraps(root)[0];
  const tree = descendantsOf(outer.pid);
  const inner = tree.find(isToolServer)!;
  return { outer, ns: pidNs(inner.pid)!, tree };
}

describe('faults: sandboxes killed, tool servers crashing, workspaces filling up', () => {
  const root = sandboxRoot('fsb');
  let server: RolloutServer;

  beforeAll(async () => {
    server = await inProcessServer({ sandbox: { runtime: 'bwrap', root, close_grace_ms: 200 }, llm: { backends: [{ address: NO_LLM }] } });
  });
  afterAll(async () => {
    await server?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const job = (id: string, commands: string[], files?: Record<string, string>) =>
    postJson(
      `${server.url}/process`,
      { job_id: id, instance: { data_source: 'rel-sandbox', commands, ...(files ? { files } : {}) } },
      { timeoutMs: 60_000 },
    );

  it('a sandbox SIGKILLed from outside mid-RUN: critical_error "run", workspace removed, no process left', async () => {
    const t0 = performance.now();
    const pending = job('sbx-kill', ['echo started', 'sleep 30', 'echo SANDBOX-OK']);
    const { outer, ns, tree } = await sandboxOfJob(root);
    await until(async () => (await request(`${server.url}/jobs/sbx-kill`)).body.state === 'run', 'job in RUN');
    process.kill(outer.pid, 'SIGKILL');
    const r = await pending;
    const s = (performance.now() - t0) / 1000;
    expect(r.body).toMatchObject({ critical_error: 'run', success: false });
    expect(s).toBeLessThan(25);
    const left = await waitGone(() => [
      ...inNamespaces([ns]),
      ...tree.filter((p) => processTable().some((q) => q.pid === p.pid && q.cmd === p.cmd)),
    ]);
    expect(left).toEqual([]);
    await until(() => workspaceCount(root) === 0, 'workspace removed');
    observe({
      section: 'faults',
      name: 'sandbox SIGKILLed from outside (outer bwrap) mid-RUN',
      observed: `job answered after ${s.toFixed(1)} s with critical_error "run", error "${String(r.body.error).slice(0, 200)}"; ${tree.length} sandbox processes gone, workspace removed`,
      figures: { jobs: 1, lost_jobs: 0, orphans: left.length },
    });
  }, 60_000);

  it('the tool server crashing mid-command: critical_error "run", nothing left', async () => {
    const pending = job('sbx-crash', ['sleep 30', 'echo SANDBOX-OK']);
    const { outer, ns, tree } = await sandboxOfJob(root);
    await until(async () => (await request(`${server.url}/jobs/sbx-crash`)).body.state === 'run', 'job in RUN');
    const toolServer = tree.find(isToolServer)!;
    process.kill(toolServer.pid, 'SIGKILL');
    const r = await pending;
    expect(r.body).toMatchObject({ critical_error: 'run', success: false });
    const left = await waitGone(() => [...inNamespaces([ns]), ...bwraps(root).filter((p) => p.pid === outer.pid)]);
    expect(left).toEqual([]);
    await until(() => workspaceCount(root) === 0, 'workspace removed');
    const ok = await job('sbx-after-crash', ['echo SANDBOX-OK']);
    expect(ok.body).toMatchObject({ critical_error: null, reward: 1 });
    observe({
      section: 'faults',
      name: 'tool server crash (SIGKILL to the node tool server inside the sandbox)',
      observed: `job ended critical_error "run", error "${String(r.body.error).slice(0, 200)}"; sandbox namespace empty, workspace removed; the next sandboxed job succeeded`,
      figures: { jobs: 2, lost_jobs: 0, orphans: left.length },
    });
  }, 60_000);

  it.skipIf(!isRoot)(
    'the workspace filling up (sandbox root on a 160 MiB tmpfs, which also holds the execute-only node): stopped at sandbox.disk_mb, the host disk untouched, INIT failure when the host disk is full, space reclaimed',
    async () => {
      const fillRoot = sandboxRoot('fill');
      fs.mkdirSync(fillRoot, { recursive: true });
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=160m,mode=0755', 'tmpfs', fillRoot]);
      const small = await inProcessServer({
        sandbox: { runtime: 'bwrap', root: fillRoot, close_grace_ms: 200, disk_mb: 16 },
        llm: { backends: [{ address: NO_LLM }] },
      });
      try {
        const usedMb = () => Number(execFileSync('df', ['-m', '--output=used', fillRoot], { encoding: 'utf8' }).trim().split('\n')[1]);
        // A first job installs the tool server and the execute-only node under the root.
        const warm = await postJson(
          `${small.url}/process`,
          { job_id: 'fill-0', instance: { data_source: 'rel-sandbox', commands: ['echo SANDBOX-OK'] } },
          { timeoutMs: 60_000 },
        );
        expect(warm.body.critical_error).toBe(null);
        const before = usedMb();
        // 1. A command writes past the workspace quota (a private tmpfs of sandbox.disk_mb): the job is
        //    stopped with a critical error naming the limit, and the host disk does not grow.
        const r = await postJson(
          `${small.url}/process`,
          {
            job_id: 'fill-1',
            instance: { data_source: 'rel-sandbox', commands: ['head -c 64M /dev/zero > big.bin; echo rc=$?', 'echo SANDBOX-OK'] },
          },
          { timeoutMs: 60_000 },
        );
        expect(r.body.critical_error).not.toBe(null);
        expect(String(r.body.error)).toMatch(/sandbox\.disk_mb/);
        const out = String(r.body.error);
        await until(() => workspaceCount(fillRoot) === 0, 'workspace removed');
        const afterJob = usedMb();
        expect(afterJob - before).toBeLessThan(2);
        // 2. The disk is full before the job: creating its workspace fails, the job ends in INIT.
        const hog = `${fillRoot}/hog.bin`;
        try {
          execFileSync('sh', ['-c', `head -c 256M /dev/zero > ${hog}`], { stdio: 'ignore' });
        } catch {
          /* ENOSPC is the point */
        }
        const full = await postJson(
          `${small.url}/process`,
          {
            job_id: 'fill-2',
            instance: { data_source: 'rel-sandbox', commands: ['echo SANDBOX-OK'], files: { 'data.txt': 'x'.repeat(64 * 1024) } },
          },
          { timeoutMs: 60_000 },
        );
        expect(full.body).toMatchObject({ critical_error: 'init', success: false });
        expect((await request(`${small.url}/health`)).status).toBe(200);
        fs.rmSync(hog);
        // 3. Space back: the same server runs sandboxed jobs again.
        const again = await postJson(
          `${small.url}/process`,
          { job_id: 'fill-3', instance: { data_source: 'rel-sandbox', commands: ['echo SANDBOX-OK'] } },
          { timeoutMs: 60_000 },
        );
        expect(again.body).toMatchObject({ critical_error: null, reward: 1 });
        expect(await waitGone(() => bwraps(fillRoot))).toEqual([]);
        observe({
          section: 'faults',
          name: 'workspace filling up (sandbox.disk_mb 16; sandbox root on a 160 MiB tmpfs)',
          observed: `writing 64 MiB into a 16 MB workspace: "${out.slice(0, 160)}" (critical_error ${r.body.critical_error}), host disk ${afterJob} MiB used after (${before} before); with the disk full beforehand: critical_error "init", error "${String(full.body.error).slice(0, 160)}"; after freeing space the next job succeeded`,
          figures: { jobs: 4, lost_jobs: 0, orphans: 0 },
        });
      } finally {
        await small.close();
        execFileSync('umount', ['-l', fillRoot]);
        fs.rmSync(fillRoot, { recursive: true, force: true });
      }
    },
    90_000,
  );

  it("path traversal and shell metacharacters in a task's workspace files: refused before any sandbox process, or kept inert", async () => {
    const marker = `/tmp/raas-rel-pwned-${process.pid}`;
    let maxBwraps = 0;
    const poll = setInterval(() => (maxBwraps = Math.max(maxBwraps, outerBwraps(root).length)), 5);
    const traversal = await Promise.all(
      ['../escape.txt', '../../../etc/cron.d/x', '/etc/passwd'].map((key, i) =>
        job(`files-trav-${i}`, ['echo SANDBOX-OK'], { [key]: 'x' }),
      ),
    );
    clearInterval(poll);
    for (const r of traversal) {
      expect(r.body).toMatchObject({ critical_error: 'init', success: false });
      expect(r.body.error).toMatch(/relative path inside the workspace/);
    }
    expect(maxBwraps).toBe(0);
    expect(workspaceCount(root)).toBe(0);
    expect(fs.existsSync(path.join(root, 'escape.txt'))).toBe(false);
    // Metacharacters in a file name are just a file name; nothing runs.
    // (The "/" in the first key makes nested directories, so list files recursively.)
    const meta = await job('files-meta', ['find . -type f | sort', 'echo SANDBOX-OK'], { [`$(touch ${marker}); x`]: 'y', '`id`.txt': 'z' });
    expect(meta.body.critical_error).toBe(null);
    expect(meta.body.details.outputs[0]).toContain(`$(touch ${marker}); x`);
    expect(fs.existsSync(marker)).toBe(false);
    observe({
      section: 'faults',
      name: "path traversal / shell metacharacters in a task's workspace files",
      observed: `"../escape.txt", "../../../etc/cron.d/x", "/etc/passwd" as file keys: critical_error "init", error "${String(traversal[0].body.error).slice(0, 150)}", bwrap processes started meanwhile: ${maxBwraps}; metacharacter file names created literally (ls: ${JSON.stringify(String(meta.body.details.outputs[0]).trim().split('\n'))}), nothing executed`,
      figures: { jobs: 4, lost_jobs: 0 },
    });
  }, 60_000);

  it('a server closed while sandboxes are still starting leaves no workspace behind', async () => {
    const startRoot = sandboxRoot('startclose');
    // A node that takes 15 s to start keeps the sandboxes in their start phase while the server closes.
    const slowNode = `${startRoot}-slow/bin/node`;
    fs.mkdirSync(path.dirname(slowNode), { recursive: true, mode: 0o755 });
    fs.chmodSync(`${startRoot}-slow`, 0o755);
    fs.writeFileSync(slowNode, `#!/bin/sh\nsleep 15\nexec ${process.execPath} "$@"\n`, { mode: 0o755 });
    const srv = await inProcessServer({
      sandbox: { runtime: 'bwrap', root: startRoot, close_grace_ms: 200, node: slowNode },
      llm: { backends: [{ address: NO_LLM }] },
    });
    const pending = [0, 1, 2].map((i) =>
      postJson(
        `${srv.url}/process`,
        { job_id: `start-${i}`, instance: { data_source: 'rel-sandbox', commands: ['echo SANDBOX-OK'] } },
        { timeoutMs: 60_000 },
      ).catch((e: Error) => e),
    );
    // Close once all three jobs are in INIT and their bwraps exist, before their tool servers answer.
    await until(() => srv.pipeline.status().init === 3 && outerBwraps(startRoot).length === 3, 'three sandboxes starting', 30_000, 5);
    await new Promise((r) => setTimeout(r, 300));
    const starting = descendantsOf(process.pid).filter(isToolServer).length;
    await srv.close();
    const atClose = workspaceCount(startRoot);
    const answers = await Promise.all(pending);
    await new Promise((r) => setTimeout(r, 1500));
    const later = workspaceCount(startRoot);
    const left = await waitGone(() => bwraps(startRoot));
    observe({
      section: 'faults',
      name: 'server close() while sandboxes are still starting',
      observed: `closed while bwrap was starting (${starting} tool server(s) up); answers: ${answers.map((a) => (a instanceof Error ? a.message : `${a.status} ${a.body?.critical_error}`)).join(', ')}; workspaces left when close() resolved: ${atClose}, 1.5 s later: ${later}; bwrap processes left: ${left.length}`,
      figures: { jobs: 3, lost_jobs: answers.filter((a) => a instanceof Error).length, orphans: left.length, stale_workspaces: atClose },
    });
    fs.rmSync(startRoot, { recursive: true, force: true });
    fs.rmSync(`${startRoot}-slow`, { recursive: true, force: true });
    expect(starting).toBe(0);
    expect(left).toEqual([]);
    expect(answers.filter((a) => a instanceof Error)).toEqual([]);
    // close() must not resolve (and `raas serve` must not exit) before starting sandboxes are cleaned up.
    expect(atClose).toBe(0);
  }, 90_000);

  it('nothing of the sandboxes is left: no bwrap of this root, no workspace', async () => {
    expect(await waitGone(() => bwraps(root))).toEqual([]);
    expect(workspaceCount(root)).toBe(0);
  });
});
