import { esc, fmt, niceAxis } from './plot.js';

/** What a run plot needs of a step (a StepSummary, plus dropped_error when known). */
export interface PlotStep {
  step: number;
  wall_s: number;
  accepted: number;
  filtered: number;
  dropped_error?: number;
  mean_reward: number;
  batch_mean_reward: number;
  informative_groups_per_s: number;
  staleness_mean: number;
  staleness_max: number;
  tokens_generated: number;
  tokens_wasted: number;
}

interface PanelSeries {
  name: string;
  color: string;
  values: number[];
  dashed?: boolean;
}

interface Panel {
  title: string;
  unit: string;
  series: PanelSeries[];
  /** Values are fractions shown as percentages. */
  percent?: boolean;
}

const BLUE = '#1f77b4',
  ORANGE = '#ff7f0e',
  RED = '#d62728',
  GREEN = '#2ca02c',
  PURPLE = '#9467bd',
  BROWN = '#8c564b',
  GREY = '#7f7f7f';

/** The panels of `runs/<name>/plot.svg`, one per figure a researcher watches. */
function runPanels(steps: readonly PlotStep[]): Panel[] {
  const col = (f: (s: PlotStep) => number): number[] => steps.map(f);
  const finished = (s: PlotStep): number => s.accepted + s.filtered + (s.dropped_error ?? 0);
  return [
    {
      title: 'reward',
      unit: 'mean reward',
      series: [
        { name: 'all rollouts completed in the step', color: BLUE, values: col((s) => s.mean_reward) },
        { name: 'the batch', color: ORANGE, values: col((s) => s.batch_mean_reward), dashed: true },
      ],
    },
    {
      title: 'informative groups/s',
      unit: 'groups/s',
      series: [{ name: 'accepted groups handed over per second', color: GREEN, values: col((s) => s.informative_groups_per_s) }],
    },
    {
      title: 'filtered share',
      unit: '% of finished groups',
      percent: true,
      series: [{ name: 'filtered (all rewards equal)', color: PURPLE, values: col((s) => (finished(s) ? s.filtered / finished(s) : 0)) }],
    },
    {
      title: 'waste',
      unit: '% of generated tokens',
      percent: true,
      series: [
        {
          name: 'tokens that reach no batch',
          color: RED,
          values: col((s) => (s.tokens_generated ? s.tokens_wasted / s.tokens_generated : 0)),
        },
      ],
    },
    {
      title: 'staleness',
      unit: 'policy versions',
      series: [
        { name: 'mean', color: BROWN, values: col((s) => s.staleness_mean) },
        { name: 'max', color: GREY, values: col((s) => s.staleness_max), dashed: true },
      ],
    },
    { title: 'step time', unit: 'seconds', series: [{ name: 'wall time of the step window', color: BLUE, values: col((s) => s.wall_s) }] },
  ];
}

const CHAR_W = 6.2; // average glyph width of 11px sans-serif, for laying labels out without overlap

/**
 * `runs/<name>/plot.svg`: a grid of panels over steps (reward, informative groups/s, filtered share,
 * waste, staleness, step time), each with its own y axis from 0 to a rounded value above its
 * maximum, at least five ticks, a grid, and its legend on lines of its own under the panel title.
 */
export function runPlotSvg(title: string, steps: readonly PlotStep[], opts: { columns?: number } = {}): string {
  const panels = runPanels(steps);
  const cols = opts.columns ?? 2;
  const rows = Math.ceil(panels.length / cols);
  const PW = 460,
    PH = 270,
    GAP = 16,
    TOP = 44;
  const W = cols * PW + (cols + 1) * GAP,
    H = TOP + rows * PH + (rows + 1) * GAP;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="26" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`,
  ];
  panels.forEach((p, i) => {
    const x0 = GAP + (i % cols) * (PW + GAP),
      y0 = TOP + GAP + Math.floor(i / cols) * (PH + GAP);
    out.push(
      ...panelSvg(
        p,
        steps.map((s) => s.step),
        x0,
        y0,
        PW,
        PH,
      ),
    );
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function panelSvg(p: Panel, xs: number[], x0: number, y0: number, W: number, H: number): string[] {
  const out: string[] = [`<g class="panel">`, `<rect x="${x0}" y="${y0}" width="${W}" height="${H}" fill="none" stroke="#ddd"/>`];
  out.push(`<text x="${x0 + 10}" y="${y0 + 18}" font-size="13" font-weight="bold">${esc(p.title)}</text>`);
  // Legend: entries flow left to right and wrap, each placed after the previous one's measured width.
  let lx = x0 + 10,
    ly = y0 + 36;
  for (const s of p.series) {
    const w = 26 + s.name.length * CHAR_W + 14;
    if (lx + w > x0 + W - 10 && lx > x0 + 10) {
      lx = x0 + 10;
      ly += 15;
    }
    out.push(
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 18}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`,
    );
    out.push(`<text x="${lx + 24}" y="${ly}" fill="#333">${esc(s.name)}</text>`);
    lx += w;
  }
  const m = { l: 58, r: 16, t: ly - y0 + 14, b: 40 };
  const pl = x0 + m.l,
    pr = x0 + W - m.r,
    pt = y0 + m.t,
    pb = y0 + H - m.b;
  const vals = p.series.flatMap((s) => s.values).filter(Number.isFinite);
  const scale = p.percent ? 100 : 1;
  const axis = niceAxis(Math.max(0, ...vals) * scale, Math.min(0, ...vals) * scale);
  const y = (v: number): number => pb - ((v * scale - axis.bottom) / (axis.top - axis.bottom)) * (pb - pt);
  const n = xs.length;
  const xMin = n ? xs[0]! : 0,
    xMax = n ? xs[n - 1]! : 1;
  const span = Math.max(1, xMax - xMin);
  const pad = 12;
  const x = (v: number): number => (n <= 1 ? (pl + pr) / 2 : pl + pad + ((v - xMin) / span) * (pr - pl - 2 * pad));
  // Grid and y ticks.
  for (const t of axis.ticks) {
    const ty = y(t / scale);
    out.push(`<line x1="${pl}" y1="${ty.toFixed(1)}" x2="${pr}" y2="${ty.toFixed(1)}" stroke="${t === 0 ? '#333' : '#e5e5e5'}"/>`);
    out.push(`<text x="${pl - 6}" y="${(ty + 4).toFixed(1)}" text-anchor="end" fill="#333">${fmt(t)}${p.percent ? '%' : ''}</text>`);
  }
  out.push(`<line x1="${pl}" y1="${pt}" x2="${pl}" y2="${pb}" stroke="#333"/>`);
  out.push(`<text transform="translate(${x0 + 14} ${(pt + pb) / 2}) rotate(-90)" text-anchor="middle" fill="#555">${esc(p.unit)}</text>`);
  // X ticks: every step while they fit (one label per 36 px), else an even subset.
  const every = Math.max(1, Math.ceil((n * 36) / Math.max(1, pr - pl)));
  xs.forEach((v, i) => {
    if (i % every !== 0 && i !== n - 1) return;
    if (i === n - 1 && i % every !== 0 && (n - 1) % every < every / 2) return; // too close to the previous label
    out.push(`<line x1="${x(v).toFixed(1)}" y1="${pb}" x2="${x(v).toFixed(1)}" y2="${pb + 4}" stroke="#333"/>`);
    out.push(`<text x="${x(v).toFixed(1)}" y="${pb + 16}" text-anchor="middle" fill="#333">${v}</text>`);
  });
  out.push(`<text x="${(pl + pr) / 2}" y="${y0 + H - 8}" text-anchor="middle" fill="#555">step</text>`);
  for (const s of p.series) {
    const pts = s.values.map((v, i) => `${x(xs[i]!).toFixed(1)},${y(Number.isFinite(v) ? v : 0).toFixed(1)}`);
    if (pts.length > 1)
      out.push(
        `<polyline fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 3"' : ''} points="${pts.join(' ')}"/>`,
      );
    if (pts.length <= 40)
      for (const pt of pts) {
        const [cx, cy] = pt.split(',');
        out.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${s.color}"/>`);
      }
  }
  if (n === 0) out.push(`<text x="${(pl + pr) / 2}" y="${(pt + pb) / 2}" text-anchor="middle" fill="#999">no step yet</text>`);
  out.push('</g>');
  return out;
}
