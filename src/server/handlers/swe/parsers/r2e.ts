/**
 * R2E-Gym's grading of its own rows: the output of the image's `run_tests.sh` parsed by its pytest
 * parser, then compared whole with the row's `expected_output_json`
 * (R2E-Gym src/r2egym/repo_analysis/execution_log_parser.py@69bc953:4-35, 66-68;
 * src/r2egym/agenthub/runtime/docker.py@69bc953:396-400 and 539-569).
 */
import { pyStrip, type StatusMap } from './text.js';

/** `re.sub(r"\x1b\[[0-9;]*m|\r", "", output)`: what run_tests() removes first (docker.py@69bc953:399). */
export function cleanR2eOutput(output: string): string {
  return output.replace(/\x1b\[[0-9;]*m|\r/g, '');
}

/**
 * R2E-Gym's `parse_log_pytest`: nothing unless the log has pytest's "short test summary info";
 * after it, each line holding PASSED, FAILED or ERROR (tested in that order, anywhere in the line)
 * names the test by its node id past the file, joined with `.` (`f.py::C::t` → `C.t`).
 */
export function parseLogR2e(log: string): StatusMap {
  const map: StatusMap = new Map();
  const marker = 'short test summary info';
  const at = log.indexOf(marker);
  if (at < 0) return map;
  // `log.split(marker)[1]`: up to a second marker, if any.
  const next = log.indexOf(marker, at + marker.length);
  const part = pyStrip(log.slice(at + marker.length, next < 0 ? undefined : next));
  for (const line of part.split('\n')) {
    const name = line.split('::').slice(1).join('.');
    if (line.includes('PASSED')) map.set(name, 'PASSED');
    else if (line.includes('FAILED')) map.set(name.split(' - ')[0]!, 'FAILED');
    else if (line.includes('ERROR')) map.set(name.split(' - ')[0]!, 'ERROR');
  }
  return map;
}

/** `decolor_dict_keys` (execution_log_parser.py@69bc953:66-68): `\x1b[<digits>m` removed from keys. */
function decolorKeys(m: ReadonlyMap<string, string>): StatusMap {
  const out: StatusMap = new Map();
  for (const [k, v] of m) out.set(k.replace(/\x1b\[\d+m/g, ''), v);
  return out;
}

/** The comparison of docker.py@69bc953:552-565: both maps keyed by the name before ` - `, same size, every parsed status equal to the expected one. */
export function r2eMatches(
  parsed: ReadonlyMap<string, string>,
  expected: ReadonlyMap<string, string>,
): { match: boolean; mismatched: string[]; missing: string[]; extra: string[] } {
  const norm = (m: ReadonlyMap<string, string>): StatusMap => {
    const out: StatusMap = new Map();
    for (const k of [...m.keys()].sort()) out.set(k.split(' - ')[0]!, m.get(k)!);
    return out;
  };
  const p = norm(decolorKeys(parsed));
  const e = norm(decolorKeys(expected));
  const mismatched: string[] = [];
  const extra: string[] = [];
  for (const [k, v] of p) {
    if (!e.has(k)) extra.push(k);
    else if (e.get(k) !== v) mismatched.push(k);
  }
  const missing = [...e.keys()].filter((k) => !p.has(k));
  return { match: p.size === e.size && mismatched.length === 0 && extra.length === 0, mismatched, missing, extra };
}
