// The trajectory page: why one rollout got its reward (grader details, errors), how long each stage
// took, the turns as the model saw them, and the token view.
import { useRef, useState } from 'preact/hooks';
import { ErrorBox, Field, Json, StateBadge, html } from './html.js';
import { num, secs } from './format.js';
import { TokenView } from './tokens.js';
import { useVirtual } from './virtual.js';

/**
 * @typedef {import('../model.js').TrajectoryView} TrajectoryView
 * @typedef {import('../model.js').TurnView} TurnView
 */

const CLAMP = 4000;

/** @param {{view: TrajectoryView, actions?: unknown}} p */
export function Trajectory({ view, actions }) {
  const [tab, setTab] = useState(/** @type {'turns' | 'tokens' | 'raw'} */ ('turns'));
  const [focus, setFocus] = useState(/** @type {{start: number, end: number} | null} */ (null));
  /** @param {TurnView} t */
  const showTokens = (t) => {
    if (t.start === undefined || t.end === undefined) return;
    setFocus({ start: t.start, end: t.end });
    setTab('tokens');
  };
  return html`<div class="trajectory">
    <${Summary} view=${view} actions=${actions} />
    <${Outcome} view=${view} />
    <div class="tabs" role="tablist">
      <button role="tab" class=${tab === 'turns' ? 'on' : ''} onClick=${() => setTab('turns')}>Turns (${view.turns.length})</button>
      <button role="tab" class=${tab === 'tokens' ? 'on' : ''} onClick=${() => setTab('tokens')}>Tokens (${view.sequences.reduce((a, s) => a + s.ids.length, 0)})</button>
      <button role="tab" class=${tab === 'raw' ? 'on' : ''} onClick=${() => setTab('raw')}>Fields</button>
    </div>
    ${tab === 'turns' ? html`<${Turns} view=${view} onTokens=${showTokens} />` : null}
    ${tab === 'tokens' ? html`<${TokenView} view=${view} focus=${focus} />` : null}
    ${tab === 'raw' ? html`<${Json} value=${{ ...view, turns: undefined, sequences: undefined, vocab: undefined, special: undefined }} />` : null}
  </div>`;
}

/** @param {{view: TrajectoryView, actions?: unknown}} p */
function Summary({ view, actions }) {
  const rewardCls = view.critical_error ? 'bad' : view.reward > 0 ? 'good' : 'zero';
  return html`<div class="summary">
    <div class=${`reward ${rewardCls}`} title="reward"><div class="label">reward</div><div class="big" id="reward">${num(view.reward)}</div></div>
    <div class="fields">
      <${Field} label="job" value=${view.job_id} />
      ${view.state ? html`<${Field} label="state" value=${html`<${StateBadge} state=${view.state} />`} />` : null}
      ${view.data_source ? html`<${Field} label="data source" value=${view.data_source} />` : null}
      ${view.instance_id !== undefined ? html`<${Field} label="instance" value=${String(view.instance_id)} />` : null}
      ${view.resolved !== undefined ? html`<${Field} label="resolved" value=${String(view.resolved)} />` : null}
      ${view.finish_reason ? html`<${Field} label="finish reason" value=${view.finish_reason} />` : null}
      <${Field} label="turns" value=${view.num_turns ?? view.turns.filter((t) => t.role === 'assistant').length} />
      ${view.filter !== undefined ? html`<${Field} label="filter" value=${view.filter ? `yes (${view.filter_reason ?? ''})` : 'no'} />` : null}
      ${view.shaped_reward !== undefined ? html`<${Field} label="shaped reward" value=${num(view.shaped_reward)} />` : null}
      ${view.advantage !== undefined ? html`<${Field} label="advantage" value=${num(view.advantage)} />` : null}
      ${view.policy_version !== undefined && view.policy_version !== null ? html`<${Field} label="policy version" value=${view.policy_version} title="the version the job was submitted under" />` : null}
      ${view.staleness !== undefined ? html`<${Field} label="staleness" value=${view.staleness} title="batch policy version − rollout policy version" />` : null}
      ${view.backend ? html`<${Field} label="backend" value=${view.backend} />` : null}
      ${view.step !== undefined ? html`<${Field} label="step" value=${view.step} />` : null}
    </div>
    ${actions ?? null}
  </div>`;
}

/** @param {{view: TrajectoryView}} p */
function Outcome({ view }) {
  return html`<div class="outcome">
    ${
      view.critical_error
        ? html`<section class="panel error-panel" id="critical-error">
          <h3>critical_error: ${view.critical_error}</h3>
          ${view.error ? html`<p class="error-text">${view.error}</p>` : null}
          ${view.traceback ? html`<details open><summary>traceback</summary><pre class="traceback">${view.traceback}</pre></details>` : null}
        </section>`
        : view.error
          ? html`<section class="panel"><h3>error</h3><p class="error-text">${view.error}</p></section>`
          : null
    }
    <section class="panel" id="grader">
      <h3>Why this reward</h3>
      <${Grader} view=${view} />
    </section>
    ${view.timing ? html`<section class="panel"><h3>Stage timings</h3><${Timing} timing=${view.timing} /></section>` : null}
    ${view.weight_versions.length ? html`<section class="panel"><h3>Weight versions per turn</h3><${Weights} view=${view} /></section>` : null}
  </div>`;
}

/** @param {{view: TrajectoryView}} p */
function Grader({ view }) {
  const d = view.details;
  if (!d) {
    if (view.critical_error) return html`<p>The rollout failed in ${view.critical_error}: a failed rollout scores 0, whatever it did.</p>`;
    return html`<p class="muted">The grader gave no details${view.step !== undefined ? ' (batches keep them from this version on)' : ''}.</p>`;
  }
  /** @type {unknown[]} */
  const parts = [];
  if ('ground_truth' in d || 'answer' in d) {
    const ok = view.reward > 0;
    parts.push(html`<table class="compare" id="answer-compare"><tr><th>answer extracted</th><td class=${ok ? 'good' : 'bad'}>${d.answer === null || d.answer === undefined ? html`<i>none found</i>` : String(d.answer)}</td></tr>
      <tr><th>ground truth</th><td>${String(d.ground_truth)}</td></tr></table>`);
  }
  if (typeof d.passed === 'number' && typeof d.total === 'number') {
    const tests = Array.isArray(d.tests) ? /** @type {Array<{index: number, status: string, exit_code?: number | null}>} */ (d.tests) : [];
    parts.push(html`<p id="tests-summary"><b>${d.passed} of ${d.total}</b> hidden tests passed${d.reward_mode ? ` (reward mode ${d.reward_mode})` : ''}.</p>
      <div class="chips">${tests.map((t) => html`<span class=${`chip ${t.status === 'passed' ? 'good' : t.status === 'skipped' ? 'muted' : 'bad'}`} title=${t.exit_code === undefined ? '' : `exit code ${t.exit_code}`}>test ${t.index}: ${t.status}</span>`)}</div>`);
  }
  for (const key of ['FAIL_TO_PASS', 'PASS_TO_PASS']) {
    const m = d[key];
    if (m && typeof m === 'object') {
      const entries = Object.entries(/** @type {Record<string, string>} */ (m));
      const ok = entries.filter(([, s]) => s === 'PASSED' || s === 'XFAIL').length;
      parts.push(html`<details open=${entries.length <= 20}><summary><b>${key}</b>: ${ok} of ${entries.length} pass</summary>
        <table class="tests">${entries.map(([t, s]) => html`<tr><td class="test-name">${t}</td><td class=${s === 'PASSED' || s === 'XFAIL' ? 'good' : 'bad'}>${s}</td></tr>`)}</table></details>`);
    }
  }
  if (typeof d.reason === 'string') parts.push(html`<p>${d.reason}</p>`);
  if (d.applied === false)
    parts.push(html`<p class="bad">The patch did not apply${d.apply_error ? `: ${String(d.apply_error)}` : ''}.</p>`);
  if (typeof d.test_log_tail === 'string')
    parts.push(html`<details><summary>test log (tail)</summary><pre>${d.test_log_tail}</pre></details>`);
  parts.push(html`<details><summary>all details</summary><${Json} value=${d} /></details>`);
  return html`<div>${parts}</div>`;
}

/** @param {{timing: Record<string, number | boolean>}} p */
function Timing({ timing }) {
  const parts = /** @type {Array<[string, number]>} */ (
    [
      ['queued', timing.queued_s],
      ['init', timing.init_s],
      ['run', timing.run_s],
      ['eval', timing.eval_s],
    ].filter(([, v]) => typeof v === 'number')
  );
  const total = parts.reduce((a, [, v]) => a + v, 0) || 1;
  return html`<div class="timing" id="timing">
    <div class="bar">${parts.map(([k, v]) => html`<span class=${`seg-${k}`} style=${`width:${((v / total) * 100).toFixed(2)}%`} title=${`${k} ${secs(v)}`}></span>`)}</div>
    <div class="timing-legend">${parts.map(([k, v]) => html`<span><i class=${`seg-${k}`}></i>${k} ${secs(v)}</span>`)}${timing.timeout_triggered ? html`<span class="bad">timeout triggered</span>` : null}</div>
  </div>`;
}

/** @param {{view: TrajectoryView}} p */
function Weights({ view }) {
  return html`<div class="weights" id="weights">${view.weight_versions.map((w, i) => {
    const changed = i > 0 && w !== view.weight_versions[i - 1];
    return html`<span class=${`chip ${changed ? 'changed' : ''}`} title=${changed ? 'the weights changed before this turn' : ''}>turn ${i}: ${w}</span>`;
  })}</div>`;
}

/** @param {{view: TrajectoryView, onTokens: (t: TurnView) => void}} p */
function Turns({ view, onTokens }) {
  const scroller = useRef(/** @type {HTMLDivElement | null} */ (null));
  const v = useVirtual({ count: view.turns.length, estimate: () => 120, scroller, measure: true, overscan: 6 });
  if (view.turns.length === 0) return html`<p class="muted">No turns: the rollout has neither messages nor token ids.</p>`;
  return html`<div class="turn-scroll" ref=${scroller} id="turns">
    <div style=${`height:${v.getTotalSize()}px;position:relative`}>
      ${v.getVirtualItems().map(
        (
          item,
        ) => html`<div class="turn-slot" key=${item.key} data-index=${item.index} ref=${(/** @type {HTMLElement | null} */ el) => el && v.measureElement(el)} style=${`transform:translateY(${item.start}px)`}>
          <${Turn} turn=${view.turns[item.index]} onTokens=${onTokens} />
        </div>`,
      )}
    </div>
  </div>`;
}

/** @param {{text: string}} p */
function Clamped({ text }) {
  const [all, setAll] = useState(false);
  if (text.length <= CLAMP || all) return html`<pre class="content">${text}</pre>`;
  return html`<pre class="content">${text.slice(0, CLAMP)}</pre><button class="link" onClick=${() => setAll(true)}>show all ${text.length} characters</button>`;
}

/** @param {{turn: TurnView, onTokens: (t: TurnView) => void}} p */
function Turn({ turn: t, onTokens }) {
  const low = t.low_tokens ?? 0;
  return html`<article class=${`turn role-${t.role}${t.trailing ? ' trailing' : ''}`} data-role=${t.role}>
    <header>
      <span class="role">${t.role === 'tool' ? 'observation' : t.role}</span>
      <span class="muted">#${t.index}</span>
      ${t.turn !== undefined ? html`<span>turn ${t.turn}</span>` : null}
      ${t.tokens !== undefined ? html`<span title="generated tokens">${t.tokens} tokens</span>` : null}
      ${t.logprob_mean !== undefined ? html`<span title="mean and lowest logprob of its generated tokens">logprob ${num(t.logprob_mean)} (min ${num(t.logprob_min)})</span>` : null}
      ${low ? html`<span class="warn" title="generated tokens with p < 0.1">${low} low-p</span>` : null}
      ${t.weight_version !== undefined ? html`<span class="chip" title="the backend's weight_version when the turn was generated">weights ${t.weight_version}</span>` : null}
      ${t.staleness !== undefined ? html`<span class="chip" title="batch policy version − the turn's weight version">staleness ${t.staleness}</span>` : null}
      ${t.tool_call_id ? html`<span class="muted">answers ${t.tool_call_id}</span>` : null}
      ${t.trailing ? html`<span class="muted" title="after the last assistant message: not in the result's messages">trailing</span>` : null}
      ${t.from_tokens ? html`<span class="muted" title="the rollout carried no messages: decoded from its ids">from ids</span>` : null}
      ${t.start !== undefined ? html`<button class="link" onClick=${() => onTokens(t)}>tokens ${t.start}–${t.end}</button>` : null}
    </header>
    ${t.thinking !== undefined ? html`<details class="thinking"><summary>thinking (${t.thinking.length} characters)</summary><pre>${t.thinking}</pre></details>` : null}
    ${t.content.trim() ? html`<${Clamped} text=${t.content} />` : null}
    ${t.tool_calls?.map(
      (
        c,
      ) => html`<div class="tool-call"><div><span class="tool-name">${c.name}</span>${c.id ? html` <span class="muted">${c.id}</span>` : null}</div>
        <pre>${typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments, null, 2)}</pre></div>`,
    )}
  </article>`;
}

/** @param {{message: string}} p */
export function TrajectoryError({ message }) {
  return html`<${ErrorBox} message=${message} />`;
}
