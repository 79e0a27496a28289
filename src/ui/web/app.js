// The pages' entry: which server this is (`raas serve` or `raas view`), the hash router and the frame.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { getJson } from './api.js';
import { ConsolePage, JobPage } from './console.js';
import { ErrorBox, html } from './html.js';
import { RolloutPage, RunPage, StepPage } from './run.js';

/** @typedef {import('../model.js').UiInfo} UiInfo */

function useHash() {
  const [hash, setHash] = useState(location.hash || '#/');
  useEffect(() => {
    const on = () => {
      setHash(location.hash || '#/');
      window.scrollTo(0, 0);
    };
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function App() {
  const [info, setInfo] = useState(/** @type {UiInfo | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  const [filters, setFilters] = useState({ state: '', data_source: '', critical_error: '', q: '' });
  const hash = useHash();
  useEffect(() => {
    getJson('/ui/api/info')
      .then((i) => {
        setInfo(/** @type {UiInfo} */ (i));
        document.title = /** @type {UiInfo} */ (i).mode === 'run' ? `raas view · ${/** @type {UiInfo} */ (i).title}` : 'raas console';
      })
      .catch((/** @type {Error} */ e) => setError(e.message));
  }, []);
  if (error) return html`<${ErrorBox} message=${error} />`;
  if (!info) return html`<p class="loading">loading…</p>`;
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  /** @type {unknown} */
  let page;
  /** @type {Array<[string, string]>} */
  const crumbs = [];
  if (info.mode === 'server') {
    crumbs.push(['#/', 'console']);
    if (parts[0] === 'jobs' && parts[1]) {
      crumbs.push([hash, parts[1]]);
      page = html`<${JobPage} id=${parts[1]} key=${parts[1]} />`;
    } else page = html`<${ConsolePage} filters=${filters} setFilters=${setFilters} />`;
  } else {
    crumbs.push(['#/', 'run']);
    if (parts[0] === 'steps' && parts[1] !== undefined) {
      crumbs.push([hash, `step ${parts[1]}`]);
      page = html`<${StepPage} step=${Number(parts[1])} key=${parts[1]} />`;
    } else if (parts[0] === 'rollouts' && parts[2] !== undefined) {
      crumbs.push([`#/steps/${parts[1]}`, `step ${parts[1]}`], [hash, parts[2]]);
      page = html`<${RolloutPage} step=${Number(parts[1])} job=${parts[2]} key=${hash} />`;
    } else page = html`<${RunPage} />`;
  }
  return html`<div class="frame">
    <header class="top">
      <a class="brand" href="#/">raas</a>
      <span class="muted">${info.mode === 'server' ? 'console' : 'run view'} · ${info.title}</span>
      <nav class="crumbs">${crumbs.map(([href, label], i) => html`${i ? ' / ' : ''}<a href=${href}>${label}</a>`)}</nav>
    </header>
    <main>${page}</main>
  </div>`;
}

const root = document.getElementById('app');
if (root) render(html`<${App} />`, root);
