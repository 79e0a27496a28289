import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pLimit from 'p-limit';
import { afterAll, describe, expect, it } from 'vitest';
import { outputsMatch } from '../../src/server/handlers/code/tests.js';
import { mutateProgram } from '../../src/sim/policies/mutate.js';
import { toTaskRows, type TaskRow } from '../../src/sim/policies/rows.js';
import { swePlan } from '../../src/sim/policies/tasks.js';
import { readJsonl } from './helpers.js';

// Host checks of the datasets with real python3 and git (the bwrap path is in evals.test.ts).
const PY = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-h4-data-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/**
 * Runs many (program, stdin) pairs in ONE python3 process (exec with stdin/stdout redirected): on a
 * loaded 2-core machine a python3 start costs up to 0.2 s, and this checks 250 runs. The generator
 * (configs/data/gen/generate.py) runs each as a real process.
 */
function runPrograms(runs: Array<{ source: string; input: string; group?: string; expect?: string }>): Array<{ ok: boolean; out: string }> {
  const harness = [
    'import io, json, signal, sys',
    'def alarm(*_): raise TimeoutError()',
    'signal.signal(signal.SIGALRM, alarm)',
    'runs = json.load(sys.stdin)',
    'real_out, res, failed = sys.stdout, [], set()',
    'for r in runs:',
    '    if r.get("group") in failed:',
    '        res.append({"ok": False, "out": "", "skipped": True})',
    '        continue',
    '    sys.stdin, sys.stdout, ok = io.StringIO(r["input"]), io.StringIO(), True',
    '    signal.setitimer(signal.ITIMER_REAL, 1.5)',
    '    try:',
    '        exec(compile(r["source"], "solution.py", "exec"), {"__name__": "__main__"})',
    '    except SystemExit as e:',
    '        ok = e.code in (None, 0)',
    '    except BaseException:',
    '        ok = False',
    '    signal.setitimer(signal.ITIMER_REAL, 0)',
    '    out = sys.stdout.getvalue()',
    '    if r.get("group") and (not ok or out.split() != r["expect"].split()):',
    '        failed.add(r["group"])',
    '    res.append({"ok": ok, "out": out})',
    'sys.stdout = real_out',
    'print(json.dumps(res))',
  ].join('\n');
  const file = path.join(tmp, 'harness.py');
  fs.writeFileSync(file, harness);
  const r = spawnSync(PY, [file], { input: JSON.stringify(runs), encoding: 'utf8', timeout: 100_000, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`harness failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Array<{ ok: boolean; out: string }>;
}

describe('code dataset', () => {
  const rows = readJsonl('code.jsonl') as Array<{
    instance_id: string;
    tests: Array<{ input: string; output: string }>;
    reference_solution: string;
  }>;
  it('has at least 20 tasks, each with hidden tests and a reference solution', () => {
    expect(rows.length).toBeGreaterThanOrEqual(20);
    for (const r of rows) {
      expect(r.tests.length, r.instance_id).toBeGreaterThanOrEqual(4);
      expect(r.reference_solution.length).toBeGreaterThan(0);
    }
  });
  it('every reference solution passes every hidden test; every scripted near-miss fails one', () => {
    const runs = rows.flatMap((r) =>
      r.tests.flatMap((t) => [
        { source: r.reference_solution, input: t.input },
        { source: mutateProgram(r.reference_solution), input: t.input, group: r.instance_id, expect: t.output },
      ]),
    );
    const results = runPrograms(runs);
    let k = 0;
    for (const r of rows) {
      expect(mutateProgram(r.reference_solution)).not.toBe(r.reference_solution);
      let nearMissFails = false;
      for (const t of r.tests) {
        const right = results[k++]!;
        const wrong = results[k++]!;
        expect(right.ok && outputsMatch(right.out, t.output), `${r.instance_id} on ${JSON.stringify(t.input)}: ${right.out}`).toBe(true);
        if (!wrong.ok || !outputsMatch(wrong.out, t.output)) nearMissFails = true;
      }
      expect(nearMissFails, `near-miss of ${r.instance_id} passes all tests`).toBe(true);
    }
  }, 120_000);
});

describe('swe dataset', () => {
  const rows = toTaskRows(readJsonl('swe.jsonl'), { seed: 0, alpha: 1, beta: 1 }) as Array<Extract<TaskRow, { task: 'swe' }>>;
  const env = { PATH: `${path.dirname(PY)}:/usr/bin:/bin`, HOME: tmp, GIT_CONFIG_NOSYSTEM: '1' };

  function materialise(files: Record<string, string>, name: string): string {
    const dir = path.join(tmp, name);
    fs.rmSync(dir, { recursive: true, force: true });
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      fs.writeFileSync(path.join(dir, rel), text);
    }
    return dir;
  }
  const passes = (dir: string, ids: string[]) =>
    new Promise<boolean>((resolve) => {
      const child = spawn('sh', ['-c', `python3 -m unittest ${ids.join(' ')}`], { cwd: dir, env, stdio: 'ignore' });
      child.on('close', (code) => resolve(code === 0));
    });

  /** Replays a scripted plan's edits on a files map (what the policy would do through the editor). */
  function replay(files: Record<string, string>, row: (typeof rows)[number], right: boolean): Record<string, string> {
    const out = { ...files };
    for (const step of swePlan(row, right, 0)) {
      if (typeof step.call === 'function' || step.call.name !== 'str_replace_editor') continue;
      const a = step.call.arguments as { command: string; path: string; old_str?: string; new_str?: string; file_text?: string };
      const rel = a.path.replace(/^\/workspace\//, '');
      if (a.command === 'create') out[rel] = a.file_text!;
      else {
        const text = out[rel]!;
        expect(text.split(a.old_str!).length - 1, `old_str unique in ${rel}`).toBe(1);
        out[rel] = text.replace(a.old_str!, a.new_str!);
      }
    }
    return out;
  }

  it('has at least 8 tasks', () => expect(rows.length).toBeGreaterThanOrEqual(8));

  it('the scripted right edits fix each bug; the scripted near-miss edits change the code but do not resolve it', async () => {
    const limit = pLimit(4);
    await Promise.all(
      rows.map((row) =>
        limit(async () => {
          const inst = row.instance;
          const [right, wrong] = await Promise.all([
            passes(materialise(replay(inst.files!, row, true), `${row.key}-right`), [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS]),
            passes(materialise(replay(inst.files!, row, false), `${row.key}-wrong`), [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS]),
          ]);
          expect(right, `${row.key}: scripted right edits`).toBe(true);
          expect(wrong, `${row.key}: near-miss edits pass`).toBe(false);
          const edits = swePlan(row, false, 0).filter((st) => typeof st.call !== 'function' && st.call.name === 'str_replace_editor');
          expect(edits.length, `${row.key}: near-miss makes no edit`).toBeGreaterThan(0);
          for (const e of edits)
            expect((e.call as { arguments: { old_str: string; new_str: string } }).arguments.new_str).not.toBe(
              (e.call as { arguments: { old_str: string } }).arguments.old_str,
            );
        }),
      ),
    );
  }, 120_000);
});
