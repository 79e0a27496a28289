// A uPlot chart as a preact component: created once, data updated in place, resized with its box.
import uPlot from 'uplot';
import { useEffect, useRef } from 'preact/hooks';
import { html } from './html.js';

/**
 * @typedef {{label: string, color: string, dash?: boolean, scale?: string, values: Array<number | null>}} ChartSeries
 * @typedef {{title: string, x: number[], xLabel?: string, time?: boolean, series: ChartSeries[], height?: number,
 *   percent?: boolean, onPick?: (x: number) => void, id?: string}} ChartProps
 */

/** @param {ChartProps} p */
export function Chart(p) {
  const box = useRef(/** @type {HTMLDivElement | null} */ (null));
  const plot = useRef(/** @type {uPlot | null} */ (null));
  const pick = useRef(p.onPick);
  pick.current = p.onPick;
  const shape = p.series.map((s) => `${s.label}:${s.scale ?? 'y'}`).join('|');

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const fmt = p.percent ? (/** @type {number} */ v) => `${Number((v * 100).toFixed(1))}%` : undefined;
    /** @type {uPlot.Options} */
    const opts = {
      title: p.title,
      width: Math.max(200, el.clientWidth),
      height: p.height ?? 200,
      // Counts, rates and shares start at 0; a flat line of zeros still gets an axis up to 1 (or 1%).
      scales: {
        x: { time: p.time ?? false },
        y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : p.percent ? 0.01 : 1] },
      },
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      axes: [
        // Steps are whole numbers: no tick between two steps.
        {
          label: p.xLabel,
          stroke: '#5a6272',
          grid: { stroke: '#eceef2' },
          ...(p.time ? {} : { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }),
        },
        { stroke: '#5a6272', grid: { stroke: '#eceef2' }, ...(fmt ? { values: (_u, vs) => vs.map(fmt) } : {}) },
        ...(p.series.some((s) => s.scale === 'y2') ? [{ scale: 'y2', side: 1, stroke: '#5a6272', grid: { show: false } }] : []),
      ],
      series: [
        { label: p.xLabel ?? 'x' },
        ...p.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          scale: s.scale ?? 'y',
          dash: s.dash ? [6, 4] : undefined,
          points: { show: p.x.length <= 60 },
          value: fmt ? (/** @type {uPlot} */ _u, /** @type {number | null} */ v) => (v === null ? '–' : fmt(v)) : undefined,
        })),
      ],
      hooks: {
        ready: [
          (u) =>
            u.over.addEventListener('click', () => {
              const i = u.cursor.idx;
              if (i !== null && i !== undefined && pick.current) pick.current(/** @type {number} */ (u.data[0][i]));
            }),
        ],
      },
    };
    const u = new uPlot(opts, [p.x, ...p.series.map((s) => s.values)], el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: p.height ?? 200 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [shape, p.title]);

  useEffect(() => {
    plot.current?.setData([p.x, ...p.series.map((s) => s.values)]);
  });

  return html`<div class=${`chart ${p.onPick ? 'pickable' : ''}`} id=${p.id} ref=${box}></div>`;
}
