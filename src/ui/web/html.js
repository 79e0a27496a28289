// htm bound to preact (JSX-like templates without a build step) and small shared components.
import { h } from 'preact';
import htm from 'htm';
import { stateClass } from './format.js';

/** Tagged template that builds preact nodes. */
export const html = htm.bind(h);

/** @param {{state: string}} p */
export function StateBadge({ state }) {
  return html`<span class=${`badge ${stateClass(state)}`}>${state}</span>`;
}

/** @param {{label: string, value: unknown, title?: string, cls?: string}} p */
export function Field({ label, value, title, cls }) {
  return html`<div class=${`field ${cls ?? ''}`} title=${title}><div class="label">${label}</div><div class="value">${value}</div></div>`;
}

/** @param {{message: string}} p */
export function ErrorBox({ message }) {
  return html`<div class="errorbox" role="alert">${message}</div>`;
}

/** @param {{value: unknown}} p */
export function Json({ value }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}
