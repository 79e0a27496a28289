// The live console of `raas serve`: stages, backends, throughput, and the jobs, kept current by the
// server's event stream (GET /events).
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, follow, getJson, postJson } from './api.js';
import { Chart } from './chart.js';
import { ago, clip, num, pct, secs } from './format.js';
import { ErrorBox, StateBadge, html } from './html.js';
import { Trajectory } from './trajectory.js';

/**
 * @typedef {import('../model.js').Overview} Overview
 * @typedef {import('../model.js').JobList} JobList
 * @typedef {import('../model.js').JobRow} JobRow
 * @typedef {import('../model.js').JobDetail} JobDetail
 * @typedef {import('../../protocol/events.js').JobEvent} JobEvent
 * @typedef {import('../../protocol/events.js').BackendEvent} BackendEvent
 * @typedef {{state: string, data_source: string, critical_error: string, q: string}} Filters
 */

const STATES = ['queued_init', 'init', 'queued_run', 'run', 'queued_eval', 'eval', 'done', 'failed', 'cancelled', 'timed_out'];

/** @param {Filters} f */
function query(f) {
  const p = new URLSearchParams({ limit: '500' });
  for (const [k, v] of Object.entries(f)) if (v) p.set(k, v);
  return `/ui/api/jobs?${p}`;
}

/** @param {JobRow} r @param {Filters} f */
function matches(r, f) {
  const groups = /** @type {Record<string, string[]>} */ ({
    live: STATES.slice(0, 6),
    queued: ['queued_init', 'queued_run', 'queued_eval'],
    running: ['init', 'run', 'eval'],
    ended: STATES.slice(6),
  });
  if (f.state && !(groups[f.state] ? groups[f.state].includes(r.state) : r.state === f.state)) return false;
  if (f.data_source && r.data_source !== f.data_source) return false;
  if (f.critical_error === 'any' && !r.critical_error) return false;
  if (f.critical_error === 'none' && r.critical_error) return false;
  if (f.critical_error && !['any', 'none'].includes(f.critical_error) && r.critical_error !== f.critical_error) return false;
  if (f.q && !`${r.job_id} ${r.group_id ?? ''} ${r.instance_id ?? ''}`.toLowerCase().includes(f.q.toLowerCase())) return false;
  return true;
}

/** @param {{filters: Filters, setFilters: (f: Filters) => void}} p */
export function ConsolePage({ filters, setFilters }) {
  const [ov, setOv] = useState(/** @type {Overview | null} */ (null));
  const [list, setList] = useState(/** @type {JobList | null} */ (null));
  const [conn, setConn] = useState('connecting');
  const [error, setError] = useState(/** @type {string | null} */ (null));
  const [events, setEvents] = useState(/** @type {Array<{id: number | undefined, text: string, cls: string}>} */ ([]));
  const [epoch, setEpoch] = useState(0);
  const fref = useRef(filters);
  fref.current = filters;

  // Snapshot, then the stream from the snapshot's last event; a reset reads the snapshot again.
  useEffect(() => {
    let closed = false;
    /** @type {() => void} */
    let stop = () => {};
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let refetch;
    /** @type {JobEvent[]} */
    const pending = [];
    /** @type {number | undefined} */
    let frame;
    const reload = () =>
      getJson(query(fref.current))
        .then((l) => !closed && setList(/** @type {JobList} */ (l)))
        .catch((/** @type {Error} */ e) => setError(e.message));
    getJson('/ui/api/overview')
      .then((o) => {
        if (closed) return;
        const snap = /** @type {Overview} */ (o);
        setOv(snap);
        return reload().then(() => {
          stop = follow('/events?stats=1', snap.last_event_id, {
            onState: (s) => setConn(s),
            onReset: () => setEpoch((x) => x + 1),
            onEvent: (name, data, id) => {
              if (name === 'stats') return setOv(/** @type {Overview} */ (data));
              if (name === 'job') {
                const e = /** @type {JobEvent} */ (data);
                // A busy server sends thousands of job events a second: they are applied once per frame.
                pending.push(e);
                frame ??= requestAnimationFrame(() => {
                  frame = undefined;
                  const batch = pending.splice(0);
                  setList((l) => (l ? applyJobs(l, batch, fref.current) : l));
                });
                if (e.critical_error && e.critical_error !== 'cancelled')
                  setEvents((ev) =>
                    [
                      { id, text: `${e.job_id} ${e.state}: ${e.critical_error}${e.error ? ` (${clip(e.error, 80)})` : ''}`, cls: 'bad' },
                      ...ev,
                    ].slice(0, 30),
                  );
                // Counts and rows that left the filter are re-read now and then, not per event.
                refetch ??= setTimeout(() => {
                  refetch = undefined;
                  void reload();
                }, 2000);
              }
              if (name === 'backend') {
                const b = /** @type {BackendEvent} */ (data);
                setEvents((ev) =>
                  [
                    {
                      id,
                      text: `backend ${b.backend.address} ${b.change}${b.change === 'weight_version' ? ` → ${b.backend.weight_version}` : ''}${b.backend.last_error && b.change === 'unhealthy' ? ` (${clip(b.backend.last_error, 80)})` : ''}`,
                      cls: b.change === 'unhealthy' ? 'bad' : '',
                    },
                    ...ev,
                  ].slice(0, 30),
                );
              }
            },
          });
        });
      })
      .catch((/** @type {Error} */ e) => setError(e instanceof ApiError ? `${e.code}: ${e.message}` : e.message));
    return () => {
      closed = true;
      stop();
      if (refetch) clearTimeout(refetch);
      if (frame !== undefined) cancelAnimationFrame(frame);
    };
  }, [epoch]);

  useEffect(() => {
    getJson(query(filters))
      .then((l) => setList(/** @type {JobList} */ (l)))
      .catch((/** @type {Error} */ e) => setError(e.message));
  }, [filters]);

  if (error) return html`<${ErrorBox} message=${error} />`;
  if (!ov) return html`<p class="loading">loading…</p>`;
  return html`<div class="console">
    <div class="statusline">
      <span class=${`pill ${ov.status === 'running' ? (ov.generation?.paused ? 'warn' : 'good') : ov.status === 'draining' ? 'warn' : 'bad'}`} id="server-status">${ov.generation?.paused ? 'paused' : ov.status}</span>
      <span class=${`pill ${conn === 'open' ? 'good' : 'warn'}`} id="live" title="the event stream (GET /events)">${conn === 'open' ? 'live' : conn}</span>
      <span class="muted">up ${secs(ov.uptime_s)} · raas ${ov.version} · event ${ov.last_event_id}</span>
    </div>
    <div class="grid3" id="stages">${['init', 'run', 'eval'].map((s) => html`<${Stage} name=${s} st=${ov.stages[/** @type {'init'|'run'|'eval'} */ (s)]} />`)}</div>
    <div class="grid2">
      <section class="panel"><h3>Jobs per ${ov.throughput.bucket_s} s (last ${(ov.throughput.bucket_s * ov.throughput.buckets.length) / 60} min)</h3>
        <${Chart} id="throughput" title="" time=${true} xLabel="time" height=${180} x=${ov.throughput.buckets.map((b) => b.t)} series=${[
          { label: 'admitted', color: '#8a94a6', values: ov.throughput.buckets.map((b) => b.admitted) },
          { label: 'done', color: '#2e7d32', values: ov.throughput.buckets.map((b) => b.done) },
          { label: 'failed', color: '#c62828', values: ov.throughput.buckets.map((b) => b.failed) },
          { label: 'timed out', color: '#ef6c00', values: ov.throughput.buckets.map((b) => b.timed_out) },
          { label: 'cancelled', color: '#6a1b9a', values: ov.throughput.buckets.map((b) => b.cancelled), dash: true },
          { label: 'mean reward', color: '#1565c0', scale: 'y2', values: ov.throughput.buckets.map((b) => b.mean_reward) },
        ]} />
        <div class="muted">since start: ${ov.totals.admitted} admitted · ${ov.totals.done} done · ${ov.totals.failed} failed · ${ov.totals.timed_out} timed out · ${ov.totals.cancelled} cancelled</div>
      </section>
      <section class="panel"><h3>Recent failures and backend changes</h3>
        ${events.length ? html`<ul class="events" id="event-log">${events.map((e) => html`<li class=${e.cls}><span class="muted">${e.id ?? ''}</span> ${e.text}</li>`)}</ul>` : html`<p class="muted">none since this page opened</p>`}
      </section>
    </div>
    ${ov.tenants ? html`<${Tenants} rows=${ov.tenants} />` : null}
    <${Backends} rows=${ov.backends} />
    <${Jobs} list=${list} filters=${filters} setFilters=${setFilters} />
  </div>`;
}

/**
 * Applies a frame's job events to the list: every event moves the state counts; each job's row
 * takes its newest state (and its outcome once ended), moves to the top, or leaves when it no
 * longer matches the filters.
 * @param {JobList} l @param {JobEvent[]} events @param {Filters} f @returns {JobList}
 */
function applyJobs(l, events, f) {
  const by_state = { ...l.by_state };
  /** @type {Map<string, JobRow>} */
  const rows = new Map(l.jobs.map((r) => [r.job_id, r]));
  /** @type {Set<string>} */
  const moved = new Set();
  for (const e of events) {
    if (e.from) by_state[e.from] = Math.max(0, (by_state[e.from] ?? 0) - 1);
    by_state[e.state] = (by_state[e.state] ?? 0) + 1;
    const prev = rows.get(e.job_id);
    rows.set(e.job_id, {
      ...(prev ?? { job_id: e.job_id, created_at: e.at }),
      state: e.state,
      updated_at: e.at,
      data_source: e.data_source,
      instance_id: e.instance_id,
      ...(e.group_id ? { group_id: e.group_id } : {}),
      ...(e.reward !== undefined
        ? {
            reward: e.reward,
            critical_error: e.critical_error,
            finish_reason: e.finish_reason,
            num_turns: e.num_turns,
            error: e.error,
            timing: e.timing,
            ended_at: e.at,
          }
        : {}),
    });
    moved.add(e.job_id);
  }
  let matched = l.matched;
  const before = new Set(l.jobs.map((r) => r.job_id));
  /** @type {JobRow[]} */
  const top = [];
  for (const id of [...moved].reverse()) {
    const row = /** @type {JobRow} */ (rows.get(id));
    const was = before.has(id);
    const now = matches(row, f);
    if (now) top.push(row);
    matched += (now ? 1 : 0) - (was ? 1 : 0);
  }
  const rest = l.jobs.filter((r) => !moved.has(r.job_id));
  return { ...l, jobs: [...top, ...rest], matched, by_state };
}

/** @param {{name: string, st: {queued: number, busy: number, size: number}}} p */
function Stage({ name, st }) {
  return html`<section class="panel stage" data-stage=${name}>
    <h3>${name.toUpperCase()}</h3>
    <div class="stage-figs"><div><div class="big" data-fig="queued">${st.queued}</div><div class="label">queued</div></div>
      <div><div class="big" data-fig="busy">${st.busy}<span class="of">/${st.size}</span></div><div class="label">workers busy</div></div></div>
    <div class="meter"><span style=${`width:${((st.busy / Math.max(1, st.size)) * 100).toFixed(1)}%`}></span></div>
  </section>`;
}

/** @param {{rows: import('../../protocol/status.js').TenantStatus[]}} p */
function Tenants({ rows }) {
  return html`<section class="panel"><h3>Tenants (${rows.length})</h3>
    <table class="table" id="tenants"><thead><tr><th>tenant</th><th>weight</th><th>priority</th><th>jobs</th><th>queued</th><th>in a stage</th><th>max running</th><th>max queued</th><th>backends</th></tr></thead>
      <tbody>${rows.map(
        (
          t,
        ) => html`<tr data-tenant=${t.name}><td>${t.name}</td><td>${t.weight}</td><td>${t.priority}</td><td>${t.jobs}</td><td>${t.queued}</td><td>${t.in_stage}</td>
          <td>${t.max_running ?? '–'}</td><td>${t.max_queued ?? '–'}</td><td>${t.backends}</td></tr>`,
      )}</tbody></table></section>`;
}

/** @param {{rows: import('../model.js').BackendRow[]}} p */
function Backends({ rows }) {
  return html`<section class="panel"><h3>LLM backends (${rows.length})</h3>
    ${
      rows.length === 0
        ? html`<p class="muted">No backend registered: POST /add_llm_server {"address": "http://host:port"}.</p>`
        : html`<table class="table" id="backends"><thead><tr><th>address</th><th>api</th><th>health</th><th>jobs bound</th><th>assigned</th><th>weight version</th>
          <th title="prefix-cache hit rate over the last read interval (and since the engine started)">prefix-cache hits</th><th title="the engine's running / waiting requests">engine run / wait</th><th>KV cache</th><th>last error</th></tr></thead>
        <tbody>${rows.map(
          (b) => html`<tr data-backend=${b.address}>
            <td>${b.address}${b.tenant ? html` <span class="muted">(${b.tenant})</span>` : null}</td><td>${b.api}</td>
            <td><span class=${`pill ${b.healthy === false ? 'bad' : 'good'}`}>${b.healthy === false ? 'unhealthy' : 'healthy'}</span>${b.failures ? html` <span class="muted">${b.failures} failures</span>` : null}</td>
            <td>${b.active}</td><td>${b.assigned}</td><td>${b.weight_version}</td>
            <td class="hits">${pct(b.prefix_cache_hit_rate)}${b.prefix_cache_hit_rate_total !== null ? html` <span class="muted">(${pct(b.prefix_cache_hit_rate_total)})</span>` : null}</td>
            <td>${b.engine_running ?? '–'} / ${b.engine_waiting ?? '–'}</td><td>${pct(b.kv_cache_usage)}</td>
            <td class="muted" title=${b.metrics_error ?? ''}>${clip(b.last_error ?? '', 60)}</td></tr>`,
        )}</tbody></table>`
    }
  </section>`;
}

/** @param {{list: JobList | null, filters: Filters, setFilters: (f: Filters) => void}} p */
function Jobs({ list, filters, setFilters }) {
  /** @param {keyof Filters} k @returns {(e: Event) => void} */
  const set = (k) => (e) => setFilters({ ...filters, [k]: /** @type {HTMLInputElement} */ (e.target).value });
  const now = Date.now();
  return html`<section class="panel"><h3>Jobs</h3>
    <div class="chips" id="state-counts">${STATES.filter(
      (s) => list?.by_state[/** @type {import('../../protocol/process.js').JobState} */ (s)],
    ).map(
      (s) =>
        html`<button class=${`chip ${filters.state === s ? 'on' : ''}`} onClick=${() => setFilters({ ...filters, state: filters.state === s ? '' : s })}><${StateBadge} state=${s} /> ${list?.by_state[/** @type {import('../../protocol/process.js').JobState} */ (s)]}</button>`,
    )}</div>
    <div class="filters">
      <label>state <select id="f-state" value=${filters.state} onChange=${set('state')}><option value="">any</option>
        ${['live', 'queued', 'running', 'ended', ...STATES].map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>data source <select id="f-source" value=${filters.data_source} onChange=${set('data_source')}><option value="">any</option>
        ${(list?.data_sources ?? []).map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>critical error <select id="f-error" value=${filters.critical_error} onChange=${set('critical_error')}><option value="">any</option><option value="none">none</option><option value="any">some</option>
        ${['init', 'run', 'eval', 'timeout', 'cancelled'].map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>search <input id="f-q" type="search" placeholder="job, group or instance id" value=${filters.q} onInput=${set('q')} /></label>
      <span class="muted">${list ? `${list.matched} match${list.jobs.length < list.matched ? `, newest ${list.jobs.length} shown` : ''}` : ''}</span>
      ${filters.q ? html`<a id="open-by-id" href=${`#/jobs/${encodeURIComponent(filters.q)}`} title="a finished job the list no longer keeps still opens by its id within result_ttl_s">open job ${clip(filters.q, 40)}</a>` : null}
    </div>
    <table class="table" id="jobs"><thead><tr><th>job</th><th>state</th><th>data source</th><th>instance</th><th>reward</th><th>critical error</th><th>finish</th><th>turns</th><th>queued / init / run / eval</th><th>changed</th></tr></thead>
      <tbody>${(list?.jobs ?? []).map(
        (r) => html`<tr data-job=${r.job_id} data-state=${r.state}>
          <td><a href=${`#/jobs/${encodeURIComponent(r.job_id)}`}>${clip(r.job_id, 48)}</a></td><td><${StateBadge} state=${r.state} /></td>
          <td>${r.data_source}</td><td>${clip(String(r.instance_id ?? ''), 32)}</td><td>${num(r.reward)}</td>
          <td class=${r.critical_error ? 'bad' : ''} title=${r.error ?? ''}>${r.critical_error ?? ''}</td><td>${r.finish_reason ?? ''}</td><td>${r.num_turns ?? ''}</td>
          <td class="muted">${r.timing ? `${secs(r.timing.queued_s)} / ${secs(r.timing.init_s)} / ${secs(r.timing.run_s)} / ${secs(r.timing.eval_s)}` : ''}</td>
          <td class="muted">${ago(r.updated_at, now)}</td></tr>`,
      )}</tbody></table>
  </section>`;
}

/** @param {{id: string}} p */
export function JobPage({ id }) {
  const [detail, setDetail] = useState(/** @type {JobDetail | null} */ (null));
  const [error, setError] = useState(/** @type {string | null} */ (null));
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let closed = false;
    /** @type {() => void} */
    let stop = () => {};
    getJson(`/ui/api/jobs/${encodeURIComponent(id)}`)
      .then((d) => {
        if (closed) return;
        const det = /** @type {JobDetail} */ (d);
        setDetail(det);
        setError(null);
        // A live job: follow its events and read it again when it ends.
        if (!det.trajectory)
          stop = follow('/events?types=job', undefined, {
            onReset: () => setTick((x) => x + 1),
            onEvent: (_n, data) => {
              const e = /** @type {JobEvent} */ (data);
              if (e.job_id !== id) return;
              if (['done', 'failed', 'cancelled', 'timed_out'].includes(e.state)) setTick((x) => x + 1);
              else setDetail((dd) => (dd ? { ...dd, state: e.state } : dd));
            },
          });
      })
      .catch((/** @type {Error} */ e) => setError(e instanceof ApiError ? `${e.code}: ${e.message}` : e.message));
    return () => {
      closed = true;
      stop();
    };
  }, [id, tick]);
  if (error) return html`<${ErrorBox} message=${error} />`;
  if (!detail) return html`<p class="loading">loading…</p>`;
  const cancel = async () => {
    try {
      await postJson('/cancel', { job_id: id });
    } catch (e) {
      setError(/** @type {Error} */ (e).message);
    }
  };
  const live = !detail.trajectory;
  const actions = live ? html`<button class="danger" id="cancel" onClick=${cancel}>Cancel job</button>` : null;
  if (live)
    return html`<div class="trajectory"><div class="summary"><div class="fields">
      <div class="field"><div class="label">job</div><div class="value">${detail.job_id}</div></div>
      <div class="field"><div class="label">state</div><div class="value" id="live-state"><${StateBadge} state=${detail.state} /></div></div>
      ${detail.row ? html`<div class="field"><div class="label">data source</div><div class="value">${detail.row.data_source}</div></div>` : null}</div>${actions}</div>
      <p class="muted">The job is running: its trajectory shows here when it ends.</p></div>`;
  const raw = html`<a class="raw" href=${`/jobs/${encodeURIComponent(id)}`} target="_blank" rel="noopener" title="GET /jobs/:id, the result as the API answers it">result JSON</a>`;
  return html`<${Trajectory} view=${/** @type {import('../model.js').TrajectoryView} */ (detail.trajectory)} actions=${raw} />`;
}
