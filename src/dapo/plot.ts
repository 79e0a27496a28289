/** One plotted series: values per x, drawn on its own y scale (left axis for the first, right for the second). */
export interface Series {
  name: string;
  color: string;
  values: number[];
}

export const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
export const fmt = (v: number): string => {
  if (v === 0) return '0';
  const a = Math.abs(v);
  const s = a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : a >= 0.01 ? v.toFixed(3) : v.toExponential(1);
  return s.includes('.') && !s.includes('e') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
};

/**
 * A y axis for data in [min, max]: it spans 0 (and down to below `min` when there are negative
 * values), a round step (1, 2, 2.5 or 5 × 10^k) gives 5 to 8 intervals, and the top is a multiple of
 * the step strictly above `max` (headroom: the highest point never sits on the frame).
 */
export function niceAxis(max: number, min = 0): { bottom: number; top: number; step: number; ticks: number[] } {
  const hi = Number.isFinite(max) && max > 0 ? max : 0;
  const lo = Number.isFinite(min) && min < 0 ? min : 0;
  const range = hi - lo > 0 ? hi - lo : 1;
  let best: { bottom: number; top: number; step: number } | undefined;
  // From small steps to large ones: the first that fits gives the most ticks.
  for (let k = Math.floor(Math.log10(range)) - 2; k <= Math.floor(Math.log10(range)) + 1 && !best; k++) {
    for (const f of [1, 2, 2.5, 5]) {
      const step = f * 10 ** k;
      const bottom = lo < 0 ? -(Math.floor((-lo * 1.05) / step) + 1) * step : 0;
      const top = (Math.floor(((hi === 0 && lo === 0 ? 1 : hi) * 1.05) / step) + 1) * step;
      const intervals = Math.round((top - bottom) / step);
      if (!best && intervals >= 5 && intervals <= 8) best = { bottom, top, step };
    }
  }
  best ??= { bottom: lo * 1.25, top: hi * 1.25 || 1, step: ((hi - lo) * 1.25 || 1) / 5 };
  const ticks: number[] = [];
  for (let i = 0; best.bottom + i * best.step <= best.top * (1 + 1e-9) + 1e-12; i++)
    ticks.push(Number((best.bottom + i * best.step).toPrecision(12)));
  return { ...best, ticks };
}

/**
 * A hand-written SVG line chart of up to two series over steps (no plotting dependency): the first
 * series on the left axis, the second on the right, each scaled from 0 to its maximum.
 */
export function lineChartSvg(title: string, xLabel: string, series: Series[], opts: { width?: number; height?: number } = {}): string {
  const W = opts.width ?? 640,
    H = opts.height ?? 360;
  const m = { l: 56, r: 56, t: 40, b: 48 };
  const pw = W - m.l - m.r,
    ph = H - m.t - m.b;
  const n = Math.max(1, ...series.map((s) => s.values.length));
  const x = (i: number): number => m.l + (n === 1 ? pw / 2 : (i * pw) / (n - 1));
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
    `<line x1="${m.l}" y1="${m.t + ph}" x2="${m.l + pw}" y2="${m.t + ph}" stroke="#333"/>`,
    `<text x="${m.l + pw / 2}" y="${H - 10}" text-anchor="middle">${esc(xLabel)}</text>`,
  ];
  for (let i = 0; i < n; i++) parts.push(`<text x="${x(i)}" y="${m.t + ph + 16}" text-anchor="middle">${i}</text>`);
  series.slice(0, 2).forEach((s, si) => {
    const max = Math.max(1e-9, ...s.values.filter(Number.isFinite));
    const y = (v: number): number => m.t + ph - (v / max) * ph;
    const ax = si === 0 ? m.l : m.l + pw;
    parts.push(`<line x1="${ax}" y1="${m.t}" x2="${ax}" y2="${m.t + ph}" stroke="${s.color}"/>`);
    for (const f of [0, 0.5, 1]) {
      const tx = si === 0 ? ax - 6 : ax + 6;
      parts.push(
        `<text x="${tx}" y="${y(f * max) + 4}" text-anchor="${si === 0 ? 'end' : 'start'}" fill="${s.color}">${fmt(f * max)}</text>`,
      );
    }
    const pts = s.values.map((v, i) => `${x(i).toFixed(1)},${y(Number.isFinite(v) ? v : 0).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts}"/>`);
    for (const [i, v] of s.values.entries())
      parts.push(`<circle cx="${x(i).toFixed(1)}" cy="${y(Number.isFinite(v) ? v : 0).toFixed(1)}" r="3" fill="${s.color}"/>`);
    parts.push(`<text x="${m.l + 8 + si * 200}" y="${m.t - 8}" fill="${s.color}">● ${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

/** A grouped bar chart (benchmarks): one group per category, one bar per series, each series normalised to its maximum. */
export function barChartSvg(title: string, categories: string[], series: Series[], opts: { width?: number; height?: number } = {}): string {
  const W = opts.width ?? 720,
    H = opts.height ?? 380;
  const m = { l: 40, r: 20, t: 56, b: 60 };
  const pw = W - m.l - m.r,
    ph = H - m.t - m.b;
  const gw = pw / Math.max(1, categories.length);
  const bw = (gw * 0.8) / Math.max(1, series.length);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
    `<line x1="${m.l}" y1="${m.t + ph}" x2="${m.l + pw}" y2="${m.t + ph}" stroke="#333"/>`,
  ];
  series.forEach((s, si) => {
    const max = Math.max(1e-9, ...s.values.filter(Number.isFinite));
    parts.push(`<text x="${m.l + si * 170}" y="40" fill="${s.color}">■ ${esc(s.name)} (max ${fmt(max)})</text>`);
    s.values.forEach((v, ci) => {
      const h = (Math.max(0, v) / max) * ph;
      const bx = m.l + ci * gw + gw * 0.1 + si * bw;
      parts.push(
        `<rect x="${bx.toFixed(1)}" y="${(m.t + ph - h).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${s.color}"/>`,
      );
      parts.push(
        `<text x="${(bx + bw / 2).toFixed(1)}" y="${(m.t + ph - h - 3).toFixed(1)}" text-anchor="middle" font-size="9">${fmt(v)}</text>`,
      );
    });
  });
  categories.forEach((c, ci) =>
    parts.push(`<text x="${(m.l + ci * gw + gw / 2).toFixed(1)}" y="${m.t + ph + 16}" text-anchor="middle">${esc(c)}</text>`),
  );
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
