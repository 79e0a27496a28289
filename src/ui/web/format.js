// Number, time and text formatting shared by the pages.

/** @param {number | null | undefined} v @param {number} [digits] */
export function num(v, digits = 3) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.001 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toFixed(digits)));
}

/** @param {number | null | undefined} v */
export function pct(v) {
  return v === null || v === undefined || Number.isNaN(v) ? '–' : `${(v * 100).toFixed(1)}%`;
}

/** @param {number | null | undefined} s seconds */
export function secs(s) {
  if (s === null || s === undefined) return '–';
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** @param {number} ms wall-clock ms @param {number} now */
export function ago(ms, now) {
  const s = Math.max(0, (now - ms) / 1000);
  if (s < 60) return `${s.toFixed(0)} s ago`;
  if (s < 3600) return `${(s / 60).toFixed(0)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}

/** A token's text as the token view prints it: whitespace made visible. @param {string} t */
export function visible(t) {
  return t.replace(/\n/g, '↵').replace(/\t/g, '→').replace(/\r/g, '␍');
}

/** @param {string} s @param {number} n */
export function clip(s, n) {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

/** The CSS class of a job state. @param {string} state */
export function stateClass(state) {
  if (state === 'done') return 'st-done';
  if (state === 'failed' || state === 'timed_out') return 'st-failed';
  if (state === 'cancelled') return 'st-cancelled';
  if (state.startsWith('queued')) return 'st-queued';
  return 'st-running';
}
