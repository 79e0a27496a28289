// The run view of `raas view <run dir>`: the step table and the plot's panels as charts, each step's
// groups with their rewards and advantages, and any rollout's trajectory. It follows a run in progress.
import { useEffect, useState } from 'preact/hooks';
import { follow, getJson } from './api.js';
import { Chart } from './chart.js';
import { clip, num, pct, secs } from './format.js';
import { ErrorBox, html } from './html.js';
import { Trajectory } from './trajectory.js';

/**
 * @typedef {import('../model.js').RunView} RunView
 * @typedef {import('../model.js').StepView} StepView
 * @typedef {import('../model.js').StepRow} StepRow
 * @typedef {import('../model.js').GroupRow} GroupRow
 * @typedef {import('../model.js').TrajectoryView} TrajectoryView
 */

/**
 * Reads `path` now and again whenever the run's files change (`event: run`).
 * @template T @param {string} path @returns {{data: T | null, error: string | null, live: string}}
 */
function useFollowed(path) {
  const [data, setData] = useState(/** @type {T | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  const [live, setLive] = useState('connecting');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    getJson(path, ctl.signal)
      .then((d) => {
        setData(/** @type {T} */ (d));
        setError(null);
      })
      .catch((/** @type {Error} */ e) => !ctl.signal.aborted && setError(e.message));
    return () => ctl.abort();
  }, [path, tick]);
  useEffect(
    () =>
      follow('/events', undefined, {
        onState: setLive,
        onReset: () => setTick((x) => x + 1),
        onEvent: (name) => name === 'run' && setTick((x) => x + 1),
      }),
    [],
  );
  return { data, error, live };
}

/** @param {StepRow} r @param {string} k */
const n = (r, k) => (typeof r[k] === 'number' ? /** @type {number} */ (r[k]) : null);

/** The panels of plot.svg. @param {StepRow[]} steps */
function panels(steps) {
  /** @param {string} k */
  const col = (k) => steps.map((s) => n(s, k));
  /** @param {(s: StepRow) => number | null} f */
  const map = (f) => steps.map(f);
  const finished = (/** @type {StepRow} */ s) => (n(s, 'accepted') ?? 0) + (n(s, 'filtered') ?? 0) + (n(s, 'dropped_error') ?? 0);
  return [
    {
      id: 'chart-reward',
      title: 'reward',
      series: [
        { label: 'all rollouts completed in the step', color: '#1f77b4', values: col('mean_reward') },
        { label: 'the batch', color: '#ff7f0e', values: col('batch_mean_reward'), dash: true },
      ],
    },
    {
      id: 'chart-groups',
      title: 'informative groups/s',
      series: [{ label: 'accepted groups handed over per second', color: '#2ca02c', values: col('informative_groups_per_s') }],
    },
    {
      id: 'chart-filtered',
      title: 'filtered share',
      percent: true,
      series: [
        {
          label: 'filtered (all rewards equal)',
          color: '#9467bd',
          values: map((s) => (finished(s) ? (n(s, 'filtered') ?? 0) / finished(s) : 0)),
        },
      ],
    },
    {
      id: 'chart-waste',
      title: 'waste',
      percent: true,
      series: [
        {
          label: 'tokens that reach no batch',
          color: '#d62728',
          values: map((s) =>
            (n(s, 'tokens_generated') ?? 0) > 0 ? (n(s, 'tokens_wasted') ?? 0) / /** @type {number} */ (n(s, 'tokens_generated')) : 0,
          ),
        },
      ],
    },
    {
      id: 'chart-staleness',
      title: 'staleness',
      series: [
        { label: 'mean', color: '#8c564b', values: col('staleness_mean') },
        { label: 'max', color: '#7f7f7f', values: col('staleness_max'), dash: true },
      ],
    },
    {
      id: 'chart-time',
      title: 'step time (s)',
      series: [{ label: 'wall time of the step window', color: '#1f77b4', values: col('wall_s') }],
    },
  ];
}

export function RunPage() {
  const { data: run, error, live } = useFollowed(/** @type {string} */ ('/ui/api/run'));
  if (error) return html`<${ErrorBox} message=${error} />`;
  if (!run) return html`<p class="loading">loading…</p>`;
  const r = /** @type {RunView} */ (run);
  const x = r.steps.map((s) => s.step);
  const open = (/** @type {number} */ k) => {
    location.hash = `#/steps/${k}`;
  };
  const files = new Set(r.step_files);
  return html`<div class="run">
    <div class="statusline">
      <b>${r.name}</b> <span class="muted">${r.dir}</span>
      <span class=${`pill ${r.active ? 'good' : ''}`} id="run-live" title="files of the run changed within the last minute">${r.active ? 'running' : 'idle'}</span>
      <span class=${`pill ${live === 'open' ? 'good' : 'warn'}`}>${live === 'open' ? 'following' : live}</span>
      <span class="muted">${r.steps.length} steps</span>
    </div>
    ${r.steps.length === 0 ? html`<p class="muted" id="no-steps">No step finished yet: this page follows the run and shows each step as it is written.</p>` : null}
    <div class="charts">${panels(r.steps).map((p) => html`<section class="panel"><${Chart} id=${p.id} title=${p.title} x=${x} xLabel="step" series=${p.series} percent=${p.percent} onPick=${open} height=${190} /></section>`)}</div>
    <section class="panel"><h3>Steps</h3>
      <table class="table" id="steps"><thead><tr><th>step</th><th>policy</th><th>wall</th><th>groups</th><th>accepted</th><th>filtered</th><th>cancelled</th><th>carried over</th>
        <th>mean reward</th><th>batch reward</th><th>staleness mean / max</th><th>tokens</th><th>waste</th><th>groups/s</th></tr></thead>
      <tbody>${r.steps.map(
        (s) => html`<tr class="clickable" data-step=${s.step} onClick=${() => open(s.step)}>
          <td>${files.has(s.step) ? html`<a href=${`#/steps/${s.step}`}>${s.step}</a>` : s.step}</td><td>${num(n(s, 'policy_version'))}</td><td>${secs(n(s, 'wall_s'))}</td>
          <td>${num(n(s, 'groups'))}</td><td>${num(n(s, 'accepted'))}</td><td>${num(n(s, 'filtered'))}</td><td>${num(n(s, 'cancelled'))}</td><td>${num(n(s, 'carried_over'))}</td>
          <td>${num(n(s, 'mean_reward'))}</td><td>${num(n(s, 'batch_mean_reward'))}</td><td>${num(n(s, 'staleness_mean'))} / ${num(n(s, 'staleness_max'))}</td>
          <td>${num(n(s, 'tokens_generated'))}</td><td>${pct((n(s, 'tokens_generated') ?? 0) > 0 ? (n(s, 'tokens_wasted') ?? 0) / /** @type {number} */ (n(s, 'tokens_generated')) : null)}</td>
          <td>${num(n(s, 'informative_groups_per_s'))}</td></tr>`,
      )}</tbody></table>
    </section>
    ${r.summary ? html`<details class="panel"><summary>summary.json</summary><pre class="json">${JSON.stringify(r.summary, null, 2)}</pre></details>` : null}
  </div>`;
}

const VERDICTS = ['accepted', 'filtered', 'dropped_error', 'dropped_stale', 'cancelled'];

/** @param {{step: number}} p */
export function StepPage({ step }) {
  const { data, error } = useFollowed(/** @type {string} */ (`/ui/api/run/steps/${step}`));
  const [verdict, setVerdict] = useState('');
  if (error) return html`<${ErrorBox} message=${error} />`;
  if (!data) return html`<p class="loading">loading…</p>`;
  const s = /** @type {StepView} */ (data);
  const counts = /** @type {Record<string, number>} */ ({});
  for (const g of s.groups) counts[g.verdict] = (counts[g.verdict] ?? 0) + 1;
  const shown = verdict ? s.groups.filter((g) => g.verdict === verdict) : s.groups;
  return html`<div class="step">
    <div class="statusline"><b>step ${s.step}</b> <span class="muted">policy version ${s.policy_version ?? '–'}</span>
      ${s.step > 0 ? html`<a href=${`#/steps/${s.step - 1}`}>← step ${s.step - 1}</a>` : null} <a href=${`#/steps/${s.step + 1}`}>step ${s.step + 1} →</a></div>
    <div class="chips" id="verdicts">
      <button class=${`chip ${verdict === '' ? 'on' : ''}`} onClick=${() => setVerdict('')}>all ${s.groups.length}</button>
      ${VERDICTS.filter((v) => counts[v]).map((v) => html`<button class=${`chip v-${v} ${verdict === v ? 'on' : ''}`} onClick=${() => setVerdict(v)}>${v} ${counts[v]}</button>`)}
      ${s.rejected_source ? html`<span class="muted">groups outside the batch from ${s.rejected_source}</span>` : html`<span class="muted">this run recorded no groups outside the batch</span>`}
    </div>
    <div id="groups">${shown.map((g) => html`<${Group} g=${g} step=${s.step} />`)}</div>
    <details class="panel"><summary>stats of the step</summary><pre class="json">${JSON.stringify(s.stats, null, 2)}</pre></details>
  </div>`;
}

/** @param {{g: GroupRow, step: number}} p */
function Group({ g, step }) {
  const maxAdv = Math.max(1e-9, ...g.rollouts.map((r) => Math.abs(r.advantage ?? 0)));
  return html`<section class=${`panel group v-${g.verdict}`} data-group=${g.group_id ?? ''} data-verdict=${g.verdict}>
    <h3><span class=${`chip v-${g.verdict}`}>${g.verdict}</span> ${g.group_id ?? '(group)'} <span class="muted"> ${g.data_source} · instance ${clip(String(g.instance_id ?? ''), 40)} · </span>
      <span class="muted">rewards ${g.rewards.map((x) => num(x)).join(' ')}${g.errors ? ` · ${g.errors} errors` : ''}</span></h3>
    ${
      g.rollouts.length
        ? html`<table class="table rollouts"><thead><tr><th>rollout</th><th>reward</th><th>shaped</th><th>advantage</th><th>staleness</th><th>finish</th><th>turns</th><th>tokens</th><th>error</th></tr></thead>
        <tbody>${g.rollouts.map(
          (
            r,
          ) => html`<tr class=${r.openable ? 'clickable' : ''} data-job=${r.job_id} onClick=${() => r.openable && ((location.hash = `#/rollouts/${step}/${encodeURIComponent(r.job_id)}`))}>
            <td>${r.openable ? html`<a href=${`#/rollouts/${step}/${encodeURIComponent(r.job_id)}`}>${r.job_id}</a>` : r.job_id}</td>
            <td class=${(r.reward ?? 0) > 0 ? 'good' : ''}>${num(r.reward)}</td><td>${num(r.shaped_reward)}</td>
            <td><span class="advbar"><span class=${(r.advantage ?? 0) >= 0 ? 'pos' : 'neg'} style=${`width:${((Math.abs(r.advantage ?? 0) / maxAdv) * 50).toFixed(1)}%`}></span></span>${num(r.advantage)}</td>
            <td>${r.staleness ?? ''}</td><td>${r.finish_reason ?? ''}</td><td>${r.num_turns ?? ''}</td><td>${r.response_tokens ?? ''}</td><td class="bad">${r.critical_error ?? ''}</td></tr>`,
        )}</tbody></table>`
        : html`<p class="muted">The run kept only this group's rewards (prompts.jsonl), not its rollouts.</p>`
    }
  </section>`;
}

/** @param {{step: number, job: string}} p */
export function RolloutPage({ step, job }) {
  const [view, setView] = useState(/** @type {TrajectoryView | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  useEffect(() => {
    getJson(`/ui/api/run/rollouts/${step}/${encodeURIComponent(job)}`)
      .then((v) => setView(/** @type {TrajectoryView} */ (v)))
      .catch((/** @type {Error} */ e) => setError(e.message));
  }, [step, job]);
  if (error) return html`<${ErrorBox} message=${error} />`;
  if (!view) return html`<p class="loading">loading…</p>`;
  return html`<${Trajectory} view=${view} />`;
}
