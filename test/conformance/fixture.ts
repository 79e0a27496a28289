// What the conformance suite serves to the clients it replays: a tiny upstream Python repository made
// with git at test time, the operator's repos_dir holding its bare mirror (handlers.swe.repos_dir),
// SWE-bench rows in the shape NeMo-Gym and ProRL's scripts send them, and scripted model turns for
// the simulated vLLM backend.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { PolicyContext, SimPolicy } from '../../src/sim/policy.js';
import { F2P, P2P, git, makeUpstream } from '../handlers/calc-repo.js';

export { F2P, P2P };
/** The repository the operator mirrors; rows naming another one find nothing. */
export const REPO = 'acme/calc';

/** The upstream repository and the operator's repos_dir, on disk until `remove()`. */
export interface SweFixture {
  reposDir: string;
  base: string;
  testPatch: string;
  goldPatch: string;
  remove(): void;
}

/**
 * Makes the upstream repository (a base commit with the bug, then the fix with its test) and
 * `repos_dir/acme__calc.git`, a bare mirror as `git clone --mirror` leaves it (docs/tasks.md).
 */
export function makeSweFixture(): SweFixture {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-conformance-'));
  fs.chmodSync(tmp, 0o755); // the sandbox user reads the mirror
  const work = path.join(tmp, 'upstream');
  const { base, testPatch, goldPatch } = makeUpstream(work);
  const reposDir = path.join(tmp, 'repos');
  fs.mkdirSync(reposDir);
  git(tmp, 'clone', '-q', '--mirror', work, path.join(reposDir, 'acme__calc.git'));
  execFileSync('chmod', ['-R', 'a+rX', tmp]);
  return { reposDir, base, testPatch, goldPatch, remove: () => fs.rmSync(tmp, { recursive: true, force: true }) };
}

/**
 * A Hugging Face SWE-bench row (SWE-bench docs/guides/datasets.md@726c546:45-59): no data_source,
 * FAIL_TO_PASS / PASS_TO_PASS as JSON strings. `script` names the model's turns (SCRIPT:<name> in
 * the problem statement, read by `conformancePolicy`).
 */
export function sweRow(fx: SweFixture, script: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    repo: REPO,
    instance_id: 'acme__calc-1',
    base_commit: fx.base,
    problem_statement: `add(2, 3) returns -1 instead of 5. SCRIPT:${script}`,
    hints_text: '',
    created_at: '2024-01-01T00:00:00Z',
    version: '1.0',
    environment_setup_commit: fx.base,
    patch: fx.goldPatch,
    test_patch: fx.testPatch,
    FAIL_TO_PASS: JSON.stringify([F2P]),
    PASS_TO_PASS: JSON.stringify([P2P]),
    ...over,
  };
}

/** The server config that provides the fixture: bwrap sandboxes, the mirror, unittest (no pytest in the sandbox). */
export function serverConfig(fx: SweFixture, sandboxRoot: string): Record<string, unknown> {
  return {
    sandbox: { runtime: 'bwrap', root: sandboxRoot },
    handlers: { swe: { repos_dir: fx.reposDir, test_command: 'python3 -m unittest' } },
  };
}

/** A sandbox root the sandbox user can reach. */
export function sandboxRoot(name: string): string {
  return `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-conformance-${name}-${process.pid}`;
}

/** A tool call as Qwen3 writes it. */
const call = (name: string, args: Record<string, unknown>): string =>
  `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
const edit = (body: string): string =>
  call('str_replace_editor', {
    command: 'str_replace',
    path: '/workspace/calc/__init__.py',
    old_str: 'def add(a, b):\n    return a - b\n',
    new_str: `def add(a, b):\n    ${body}\n`,
  });

/** The mark each sample leaves in its first turn; it comes from the request's seed, so two samples differ. */
export const NONCE = /sample-(\d+)/;

type Turn = (ctx: PolicyContext) => string;
/**
 * The scripts, turn by turn (past the end the last turn repeats):
 * - fix: two tool calls in one turn (bash, and think with a per-sample nonce), the fix, finish.
 * - wrong: an edit that does not fix add, finish.
 * - slow: a bash command that runs for a minute (to be cancelled or stopped).
 * - malformed: a tool call that does not parse and a good one in one turn, then finish.
 * - math-<answer>: the boxed answer and finish.
 */
const SCRIPTS: Record<string, Turn[]> = {
  fix: [
    (ctx) =>
      `Look first.\n${call('execute_bash', { command: 'git status --short | wc -l' })}\n${call('think', { thought: `sample-${Math.floor(ctx.rng() * 1e9)}` })}`,
    () => edit('return a + b'),
    () => call('finish', {}),
  ],
  wrong: [() => edit('return abs(a - b)'), () => call('finish', {})],
  slow: [() => call('execute_bash', { command: 'sleep 60', timeout: 120 })],
  malformed: [
    () =>
      `<tool_call>\n{"name": "execute_bash", "arguments": {"command": "echo bad"\n</tool_call>\n${call('execute_bash', { command: 'echo good' })}`,
    () => call('finish', {}),
  ],
};

/** Reads `SCRIPT:<name>` (swe rows) or `ANSWER:<n>` (math rows) in the prompt and plays that turn. */
export const conformancePolicy: SimPolicy = {
  name: 'conformance',
  respond(ctx) {
    const turn = ctx.promptText.split('<|im_start|>assistant').length - 2;
    const answer = /ANSWER:(\d+)/.exec(ctx.promptText);
    if (answer) return { text: `The answer is $\\boxed{${answer[1]}}$.\n${call('finish', {})}` };
    const m = /SCRIPT:([\w-]+)/.exec(ctx.promptText);
    const script = m ? SCRIPTS[m[1]!] : undefined;
    if (!script) return undefined;
    return { text: script[Math.min(turn, script.length - 1)]!(ctx) };
  },
};
