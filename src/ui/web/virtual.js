// A virtualised list as a preact hook over @tanstack/virtual-core: only the rows in view (and a few
// around them) are in the DOM, so a trajectory of 10,000 turns or 200,000 tokens scrolls as one of ten.
import { Virtualizer, elementScroll, measureElement, observeElementOffset, observeElementRect } from '@tanstack/virtual-core';
import { useLayoutEffect, useMemo, useReducer } from 'preact/hooks';

/**
 * @param {{count: number, estimate: (i: number) => number, scroller: {current: HTMLElement | null}, overscan?: number, measure?: boolean}} o
 * @returns {Virtualizer<HTMLElement, HTMLElement>}
 */
export function useVirtual(o) {
  const [, rerender] = useReducer((/** @type {number} */ x) => x + 1, 0);
  /** @type {import('@tanstack/virtual-core').VirtualizerOptions<HTMLElement, HTMLElement>} */
  const opts = {
    count: o.count,
    getScrollElement: () => o.scroller.current,
    estimateSize: o.estimate,
    scrollToFn: elementScroll,
    observeElementRect,
    observeElementOffset,
    overscan: o.overscan ?? 8,
    onChange: () => rerender(0),
    ...(o.measure ? { measureElement } : {}),
  };
  const v = useMemo(() => new Virtualizer(opts), []);
  v.setOptions(opts);
  useLayoutEffect(() => v._didMount(), []);
  useLayoutEffect(() => v._willUpdate());
  return v;
}
