/**
 * FAIL_TO_PASS / PASS_TO_PASS resolution as SWE-bench's `get_eval_report` computes it from a parsed
 * log (swebench/harness/grading.py@726c546:27-35, 94-232, 235-295).
 */
import type { StatusMap } from './parsers/index.js';

/** SWE-bench's ResolvedStatus values (constants/__init__.py@726c546:46-49). */
export type ResolutionStatus = 'RESOLVED_FULL' | 'RESOLVED_PARTIAL' | 'RESOLVED_NO';

/** Repositories graded on failures only (constants/__init__.py@726c546:129-133; JavaScript repositories). */
const FAIL_ONLY_REPOS: ReadonlySet<string> = new Set(['chartjs/Chart.js', 'processing/p5.js', 'markedjs/marked']);

/** `test_passed` (grading.py@726c546:27-28): in the log as PASSED or XFAIL. */
export function testPassed(id: string, sm: StatusMap): boolean {
  const s = sm.get(id);
  return s === 'PASSED' || s === 'XFAIL';
}

/** `test_failed` (grading.py@726c546:31-35): missing from the log, or FAILED or ERROR. A SKIPPED test is neither. */
function testFailed(id: string, sm: StatusMap): boolean {
  const s = sm.get(id);
  return s === undefined || s === 'FAILED' || s === 'ERROR';
}

/** One list's outcome: `get_eval_tests_report`'s success and failure lists. */
export interface ListReport {
  success: string[];
  failure: string[];
}

/** `get_eval_tests_report` (grading.py@726c546:94-191) for FAIL_TO_PASS and PASS_TO_PASS. */
export function evalTestsReport(
  sm: StatusMap,
  f2p: readonly string[],
  p2p: readonly string[],
  failOnly = false,
): { FAIL_TO_PASS: ListReport; PASS_TO_PASS: ListReport } {
  const check = (ids: readonly string[]): ListReport => {
    const out: ListReport = { success: [], failure: [] };
    for (const id of ids) {
      if (failOnly) {
        // check_fail_only (grading.py@726c546:130-137): only a FAILED entry fails.
        if (sm.get(id) === 'FAILED') out.failure.push(id);
        else out.success.push(id);
      } else if (testPassed(id, sm)) out.success.push(id);
      else if (testFailed(id, sm)) out.failure.push(id);
    }
    return out;
  };
  return { FAIL_TO_PASS: check(f2p), PASS_TO_PASS: check(p2p) };
}

/** `compute_fail_to_pass` / `compute_pass_to_pass` (grading.py@726c546:194-212): 1 for an empty list. */
function rate(r: ListReport): number {
  const total = r.success.length + r.failure.length;
  return total === 0 ? 1 : r.success.length / total;
}

/** `get_resolution_status` (grading.py@726c546:215-232). */
export function resolutionStatus(report: { FAIL_TO_PASS: ListReport; PASS_TO_PASS: ListReport }): ResolutionStatus {
  const f2p = rate(report.FAIL_TO_PASS);
  const p2p = rate(report.PASS_TO_PASS);
  if (f2p === 1 && p2p === 1) return 'RESOLVED_FULL';
  if (f2p < 1 && f2p > 0 && p2p === 1) return 'RESOLVED_PARTIAL';
  return 'RESOLVED_NO';
}

/** The report of one graded log: resolved only at RESOLVED_FULL (grading.py@726c546:288-290). */
export function evalReport(
  sm: StatusMap,
  f2p: readonly string[],
  p2p: readonly string[],
  repo?: string,
): { resolved: boolean; status: ResolutionStatus; tests_status: { FAIL_TO_PASS: ListReport; PASS_TO_PASS: ListReport } } {
  const tests = evalTestsReport(sm, f2p, p2p, repo !== undefined && FAIL_ONLY_REPOS.has(repo));
  const status = resolutionStatus(tests);
  return { resolved: status === 'RESOLVED_FULL', status, tests_status: tests };
}
