// The token view: every id of a sequence as the tokenizer prints it, coloured by mask or by logprob,
// with the id, text, mask and logprob on hover. Lines are laid out by character count in a
// monospace font, so every row has one height and the list is virtualised at any length.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { html } from './html.js';
import { num, visible } from './format.js';
import { useVirtual } from './virtual.js';

const ROW_PX = 20;
const LOW = Math.log(0.1);

/**
 * @typedef {import('../model.js').TrajectoryView} TrajectoryView
 * @typedef {import('../model.js').TokenSequence} TokenSequence
 */

/**
 * Starts of the lines of a sequence for `cols` characters per line: a line ends after a token
 * holding a newline, or before a token that would pass `cols`.
 * @param {TokenSequence} seq @param {Record<string, string>} vocab @param {number} cols
 * @returns {Int32Array}
 */
export function layoutLines(seq, vocab, cols) {
  const starts = [0];
  let width = 0;
  for (let i = 0; i < seq.ids.length; i++) {
    const t = vocab[seq.ids[i]] ?? `⟨${seq.ids[i]}⟩`;
    const w = Math.max(1, t.length);
    if (width > 0 && width + w > cols) {
      starts.push(i);
      width = 0;
    }
    width += w;
    if (t.includes('\n') && i + 1 < seq.ids.length) {
      starts.push(i + 1);
      width = 0;
    }
  }
  return Int32Array.from(starts);
}

/** Background of a generated token by its probability: white at p = 1, red toward p = 0. @param {number} lp */
function heat(lp) {
  const p = Math.exp(lp);
  return `hsl(4, 85%, ${(100 - (1 - p) * 48).toFixed(0)}%)`;
}

/**
 * @param {{view: TrajectoryView, focus?: {start: number, end: number, seq?: number} | null}} p
 */
export function TokenView({ view, focus }) {
  const [seqIndex, setSeq] = useState(focus?.seq ?? 0);
  const [mode, setMode] = useState(/** @type {'mask' | 'logprob'} */ ('mask'));
  const [cols, setCols] = useState(100);
  const [hover, setHover] = useState(/** @type {{i: number, x: number, y: number} | null} */ (null));
  const scroller = useRef(/** @type {HTMLDivElement | null} */ (null));
  const probe = useRef(/** @type {HTMLSpanElement | null} */ (null));
  const seq = view.sequences[Math.min(seqIndex, view.sequences.length - 1)];
  const special = useMemo(() => new Set(view.special), [view]);

  // Characters per line from the box's width and the font's measured glyph width.
  useLayoutEffect(() => {
    const el = scroller.current;
    const pr = probe.current;
    if (!el || !pr) return undefined;
    const measure = () => {
      const cw = pr.getBoundingClientRect().width / 10 || 7.8;
      setCols(Math.max(20, Math.floor((el.clientWidth - 70) / cw)));
    };
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  const lines = useMemo(() => (seq ? layoutLines(seq, view.vocab, cols) : new Int32Array()), [seq, view, cols]);
  const v = useVirtual({ count: lines.length, estimate: () => ROW_PX, scroller, overscan: 20 });

  useEffect(() => {
    if (!focus || !seq) return;
    if (focus.seq !== undefined && focus.seq !== seqIndex) setSeq(focus.seq);
    let lo = 0;
    let hi = lines.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lines[mid] <= focus.start) lo = mid;
      else hi = mid - 1;
    }
    v.scrollToIndex(lo, { align: 'start' });
  }, [focus, lines]);

  if (!seq) return html`<p class="muted">This rollout has no token ids.</p>`;
  const n = seq.ids.length;
  const gen = seq.mask.reduce((a, b) => a + b, 0);
  let sum = 0;
  let low = 0;
  for (let i = 0; i < seq.mask.length; i++)
    if (seq.mask[i] === 1) {
      sum += seq.logprobs[i];
      if (seq.logprobs[i] < LOW) low++;
    }

  /** @param {number} i */
  const cls = (i) => {
    const r = i - seq.prompt_len;
    let c = 'tk';
    if (special.has(seq.ids[i])) c += ' tk-special';
    if (focus && i >= focus.start && i < focus.end && (focus.seq ?? 0) === seqIndex) c += ' tk-focus';
    if (mode === 'mask') return c + (r < 0 ? ' tk-prompt' : seq.mask[r] === 1 ? ' tk-gen' : ' tk-obs');
    if (r < 0 || seq.mask[r] !== 1) return c + ' tk-dim';
    return c + (seq.logprobs[r] < LOW ? ' tk-low' : '');
  };
  /** @param {number} i */
  const style = (i) => {
    const r = i - seq.prompt_len;
    return mode === 'logprob' && r >= 0 && seq.mask[r] === 1 ? `background:${heat(seq.logprobs[r])}` : undefined;
  };

  /** @param {MouseEvent} e */
  const onOver = (e) => {
    const t = /** @type {HTMLElement} */ (e.target);
    const i = t.dataset?.i;
    if (i === undefined) return setHover(null);
    const r = t.getBoundingClientRect();
    setHover({ i: Number(i), x: r.left, y: r.bottom + 4 });
  };

  const tip = hover ? tooltip(seq, view, hover.i) : null;
  return html`<div class="tokens">
    <div class="toolbar">
      ${
        view.sequences.length > 1
          ? html`<label>sequence <select value=${seqIndex} onChange=${(/** @type {Event} */ e) => setSeq(Number(/** @type {HTMLSelectElement} */ (e.target).value))}>
            ${view.sequences.map((s, k) => html`<option value=${k}>${s.label} (${s.ids.length})</option>`)}
          </select></label>`
          : null
      }
      <span class="seg">
        <button class=${mode === 'mask' ? 'on' : ''} onClick=${() => setMode('mask')}>by mask</button>
        <button class=${mode === 'logprob' ? 'on' : ''} onClick=${() => setMode('logprob')}>by logprob</button>
      </span>
      ${
        mode === 'mask'
          ? html`<span class="legend"><span class="tk tk-prompt">prompt</span> <span class="tk tk-gen">generated (mask 1)</span> <span class="tk tk-obs">observation (mask 0)</span> <span class="tk tk-special">added token</span></span>`
          : html`<span class="legend"><span class="tk" style=${`background:${heat(0)}`}>p≈1</span> <span class="tk" style=${`background:${heat(Math.log(0.5))}`}>p=0.5</span> <span class="tk tk-low" style=${`background:${heat(Math.log(0.05))}`}>${'p < 0.1'}</span> <span class="tk tk-dim">not generated</span></span>`
      }
      <span class="muted" id="token-summary">${n} tokens · prompt ${seq.prompt_len} · generated ${gen} · observation ${n - seq.prompt_len - gen} · mean logprob ${gen ? num(sum / gen) : '–'} · ${low} below p 0.1 · ${view.tokenizer}</span>
    </div>
    <span class="probe" ref=${probe}>MMMMMMMMMM</span>
    <div class="token-scroll" ref=${scroller} onMouseOver=${onOver} onMouseLeave=${() => setHover(null)}>
      <div style=${`height:${v.getTotalSize()}px;position:relative`}>
        ${v.getVirtualItems().map((row) => {
          const a = lines[row.index];
          const b = row.index + 1 < lines.length ? lines[row.index + 1] : n;
          const spans = [];
          for (let i = a; i < b; i++)
            spans.push(
              html`<span class=${cls(i)} style=${style(i)} data-i=${i}>${visible(view.vocab[seq.ids[i]] ?? `⟨${seq.ids[i]}⟩`)}</span>`,
            );
          return html`<div class="token-line" key=${row.index} style=${`transform:translateY(${row.start}px)`}><span class="pos">${a}</span>${spans}</div>`;
        })}
      </div>
    </div>
    ${tip && hover ? html`<div class="tooltip" role="tooltip" style=${`left:${hover.x}px;top:${hover.y}px`}>${tip}</div>` : null}
  </div>`;
}

/** @param {TokenSequence} seq @param {TrajectoryView} view @param {number} i */
function tooltip(seq, view, i) {
  const id = seq.ids[i];
  const r = i - seq.prompt_len;
  const kind = r < 0 ? 'prompt' : seq.mask[r] === 1 ? 'generated · mask 1' : 'observation · mask 0';
  const lp = r >= 0 && seq.mask[r] === 1 ? seq.logprobs[r] : undefined;
  return html`<div><b>id ${id}</b> · position ${i}</div>
    <div class="tip-text">${JSON.stringify(view.vocab[id] ?? '')}</div>
    <div>${kind}</div>
    ${lp !== undefined ? html`<div>logprob ${num(lp, 4)} · p ${num(Math.exp(lp), 4)}</div>` : null}`;
}
