import type { TaskRow } from './rows.js';
import { hunkTexts, parseUnifiedDiff, type HunkLine } from './diff.js';
import { mutateLines, mutateProgram, nearMissAnswer } from './mutate.js';
import { lastLine, type PlanBuilder, type Step } from './scripted.js';
import type { PolicyCall } from './transcript.js';

type MathRow = Extract<TaskRow, { task: 'math' }>;
type CodeRow = Extract<TaskRow, { task: 'code' }>;
type SweRow = Extract<TaskRow, { task: 'swe' }>;
type CustomRow = Extract<TaskRow, { task: 'custom' }>;

/** The workspace path tools see inside a sandbox. */
const WS = '/workspace';

/** Math: (think,) compute the answer with Python, then box what Python printed and finish. */
export const mathPlan: PlanBuilder<MathRow> = (row, right, variant) => {
  const chosen = right ? row.instance.answer : nearMissAnswer(row.instance.answer);
  const steps: Step[] = [];
  if (variant === 1) {
    steps.push({
      call: {
        name: 'think',
        arguments: {
          thought: `I need to work out: ${firstSentence(row.instance.problem)} I will compute it and check the value with Python.`,
        },
      },
      say: ['Let me plan before computing.', 'First, a moment to plan.'],
      think: 'Plan the computation first.',
    });
  }
  steps.push({
    call: {
      name: 'execute_ipython_cell',
      arguments: { code: `# compute and check the result\nanswer = ${JSON.stringify(chosen)}\nprint(answer)` },
    },
    say: ['I will compute the result with Python.', 'Let me verify the value in Python.', 'Computing this step by step in Python.'],
    think: 'Compute the value, then check it.',
  });
  steps.push(
    finalStep((out) => {
      const value = lastLine(out[0]) ?? chosen;
      return {
        say: `The computation gives ${value}, so the final answer is $\\boxed{${value}}$.`,
        call: { name: 'finish', arguments: { answer: value } },
      };
    }, 'The printed value is the answer.'),
  );
  return steps;
};

/**
 * A program that answers each hidden test from a table (what the simulator plays for a row without
 * a reference solution, as DeepCoder's rows come): right on every test, or (`wrong`) off on the
 * first one, a near miss the grader catches.
 */
export function tableProgram(tests: ReadonlyArray<{ input: string; output: string }>, wrong = false): string {
  const answers: Record<string, string> = {};
  tests.forEach((t, i) => (answers[t.input] ??= wrong && i === 0 ? `${t.output.trimEnd()}0\n` : t.output));
  // A JSON string literal is a valid Python string literal.
  return [
    'import json, sys',
    `ANSWERS = json.loads(${JSON.stringify(JSON.stringify(answers))})`,
    'data = sys.stdin.read()',
    "out = ANSWERS.get(data, {k.strip(): v for k, v in ANSWERS.items()}.get(data.strip(), ''))",
    'sys.stdout.write(out)',
    '',
  ].join('\n');
}

/** Code: (look around,) write solution.py, run it on the example, finish. */
export const codePlan: PlanBuilder<CodeRow> = (row, right, variant) => {
  const ref = row.instance.reference_solution;
  const source = ref === undefined ? tableProgram(row.instance.tests, !right) : right ? ref : mutateProgram(ref);
  // Run the statement's own example when it has one (what a model can see); else the first test.
  const example = statementExample(row.instance.problem) ?? row.instance.tests[0]!.input;
  const steps: Step[] = [];
  if (variant === 1)
    steps.push({
      call: { name: 'execute_bash', arguments: { command: 'ls -la' } },
      say: ['Let me look at the workspace first.'],
      think: 'Check the workspace.',
    });
  steps.push({
    call: { name: 'str_replace_editor', arguments: { command: 'create', path: `${WS}/solution.py`, file_text: source } },
    say: ['I will write the solution to solution.py.', 'Here is my solution.', 'Writing the program now.'],
    think: 'Read the input, compute, print the output.',
  });
  steps.push({
    call: {
      name: 'execute_bash',
      arguments: { command: `python3 solution.py <<'RAAS_EOF'\n${example.endsWith('\n') ? example : `${example}\n`}RAAS_EOF` },
    },
    say: ['Let me run it on the example input.', 'Testing on the example.'],
    think: 'Run the example to check.',
  });
  steps.push(
    finalStep((out) => {
      const got = lastLine(out[0]?.replace(/\[The command [^\]]*\]/g, '')) ?? 'nothing';
      return {
        say: `On the example the program prints ${JSON.stringify(got)}. The solution is in solution.py.`,
        call: { name: 'finish', arguments: { message: 'solution.py is ready' } },
      };
    }, 'The program works on the example.'),
  );
  return steps;
};

/** Swe: (list files,) read the file, replay the fix hunk by hunk (or a near-miss), run the failing tests, finish. */
export const swePlan: PlanBuilder<SweRow> = (row, right, variant) => {
  const inst = row.instance;
  // SWE-bench rows carry the reference fix as `patch`.
  const reference = inst.gold_patch ?? (inst as { patch?: unknown }).patch;
  const files = parseUnifiedDiff(typeof reference === 'string' ? reference : '');
  const steps: Step[] = [];
  if (variant === 1)
    steps.push({
      call: { name: 'execute_bash', arguments: { command: "find . -name '*.py' -not -path './.git/*' | sort" } },
      say: ['Let me see the layout of the repository.'],
      think: 'Find the relevant module.',
    });
  const first = files.find((f) => f.oldPath)?.oldPath;
  if (first)
    steps.push({
      call: { name: 'execute_bash', arguments: { command: `cat ${first}` } },
      say: [`Let me read ${first}.`, `The bug is probably in ${first}; reading it.`],
      think: 'Read the code around the bug.',
    });
  const hunks = right ? files : nearMiss(files);
  for (const f of hunks) {
    const path = `${WS}/${f.newPath ?? f.oldPath}`;
    if (f.newPath === null) {
      steps.push({
        call: { name: 'execute_bash', arguments: { command: `rm ${f.oldPath}` } },
        say: ['This file is no longer needed.'],
        think: 'Remove it.',
      });
    } else if (f.oldPath === null) {
      const text =
        f.hunks
          .flat()
          .filter((l) => l.tag !== '-')
          .map((l) => l.text)
          .join('\n') + '\n';
      steps.push({
        call: { name: 'str_replace_editor', arguments: { command: 'create', path, file_text: text } },
        say: ['Adding the new file.'],
        think: 'Create it.',
      });
    } else {
      for (const h of f.hunks) {
        const { oldText, newText } = hunkTexts(h);
        steps.push({
          call: { name: 'str_replace_editor', arguments: { command: 'str_replace', path, old_str: oldText, new_str: newText } },
          say: ['Fixing the code here.', 'This is the faulty part; editing it.'],
          think: 'Apply the fix.',
        });
      }
    }
  }
  steps.push({
    call: { name: 'execute_bash', arguments: { command: `${inst.test_command} ${inst.FAIL_TO_PASS.join(' ')}` } },
    say: ['Now the failing tests.', 'Running the tests from the issue.'],
    think: 'Check the fix with the tests.',
  });
  steps.push(
    finalStep((out) => {
      const summary =
        (out[0] ?? '')
          .split('\n')
          .map((l) => l.trim())
          .find((l) => /^(OK|FAILED)\b/.test(l)) ?? 'no test summary';
      return {
        say: `The tests report: ${summary}.`,
        call: { name: 'finish', arguments: { message: `Fixed the issue; tests: ${summary}` } },
      };
    }, 'The tests ran; done.'),
  );
  return steps;
};

/**
 * A wrong fix: the first mutation rule that hits an added line and still changes the code (a
 * mutation that restores the original line is no edit at all), else the fix left out entirely.
 */
function nearMiss(files: ReturnType<typeof parseUnifiedDiff>): ReturnType<typeof parseUnifiedDiff> {
  const flat: HunkLine[] = files.flatMap((f) => f.hunks.flat());
  const changes = (texts: string[]): boolean => {
    const old = flat
      .filter((l) => l.tag !== '+')
      .map((l) => l.text)
      .join('\n');
    return texts.filter((_, i) => flat[i]!.tag !== '-').join('\n') !== old;
  };
  const r = mutateLines(
    flat.map((l) => l.text),
    (i) => flat[i]!.tag === '+',
    changes,
  );
  if (!r) return [];
  let i = 0;
  return files.map((f) => ({ ...f, hunks: f.hunks.map((h) => h.map((l) => ({ tag: l.tag, text: r.lines[i++]! }))) }));
}

function finalStep(build: (out: string[]) => { say: string; call: PolicyCall }, think: string): Step {
  return { call: (out) => build(out).call, say: (out) => build(out).say, think };
}

/** The input of an "Example input:" block in a statement (up to "Example output:"). */
export function statementExample(problem: string): string | undefined {
  const m = /Example input:\s*\n([\s\S]*?)\n\s*Example output:/i.exec(problem);
  return m ? `${m[1]!.replace(/\s+$/, '')}\n` : undefined;
}

function firstSentence(text: string): string {
  const m = /^[\s\S]*?[.?!](\s|$)/.exec(text);
  return (m ? m[0] : text).trim().slice(0, 200);
}

/** A custom row: its script's right or wrong turns, each one call (or a final text). */
export const customPlan: PlanBuilder<CustomRow> = (row, right) =>
  (right ? row.script.right : row.script.wrong).map((step, i, all) => ({
    ...(step.name ? { call: { name: step.name, arguments: step.arguments ?? {} } } : {}),
    say: [step.say ?? (step.name ? `Next: ${step.name}.` : 'Done.')],
    think: i === all.length - 1 ? 'Wrap up.' : 'Work through the task.',
  }));
