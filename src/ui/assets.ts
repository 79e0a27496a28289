import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RaasError } from '../protocol/errors.js';

/**
 * The pages' own files (HTML, CSS, ES modules), served as they are: src/ui/web under tsx, and its
 * copy dist/src/ui/web in a build (npm run build copies it, since tsc copies no JavaScript).
 */
export const WEB_DIR = fileURLToPath(new URL('./web/', import.meta.url));

/** The folder of an installed package, found by node's own search path (no reliance on its `exports`). */
function packageDir(name: string): string {
  const require = createRequire(import.meta.url);
  for (const dir of require.resolve.paths(name) ?? []) {
    const d = path.join(dir, name);
    if (existsSync(path.join(d, 'package.json'))) return d;
  }
  throw new Error(`the console needs the npm package ${name}: run npm install`);
}

/**
 * The libraries the pages import, by the name the import map gives them (`/ui/vendor/<name>`),
 * each one file of an npm dependency: nothing comes from a CDN, and only these files are served.
 */
function vendorFiles(): { files: Map<string, string>; inMemory: Map<string, string> } {
  const files = new Map<string, string>();
  const inMemory = new Map<string, string>();
  const preact = packageDir('preact');
  files.set('preact.mjs', path.join(preact, 'dist/preact.mjs'));
  files.set('preact-hooks.mjs', path.join(preact, 'hooks/dist/hooks.mjs'));
  files.set('htm.mjs', path.join(packageDir('htm'), 'dist/htm.mjs'));
  const uplot = packageDir('uplot');
  files.set('uplot.mjs', path.join(uplot, 'dist/uPlot.esm.js'));
  files.set('uplot.css', path.join(uplot, 'dist/uPlot.min.css'));
  // @tanstack/virtual-core is a few ES modules that import each other by relative path. They read
  // process.env.NODE_ENV, which a bundler replaces: here it is replaced once, at start.
  const esm = path.join(packageDir('@tanstack/virtual-core'), 'dist/esm');
  for (const f of readdirSync(esm))
    if (f.endsWith('.js'))
      inMemory.set(
        `virtual-core/${f}`,
        readFileSync(path.join(esm, f), 'utf8')
          .replaceAll('process.env.NODE_ENV', '"production"')
          .replace(/\n\/\/# sourceMappingURL=.*\n?$/, '\n'),
      );
  return { files, inMemory };
}

/** `'sha256-…'` sources of a page's inline `<tag>` blocks (the import map, the sign-in form's style). */
function inlineHashes(html: string, tag: 'script' | 'style'): string[] {
  return [...html.matchAll(new RegExp(`<${tag}[^>]*>([\\s\\S]*?)</${tag}>`, 'g'))]
    .map((m) => m[1]!)
    .filter((body) => body.trim() !== '')
    .map((body) => `'sha256-${createHash('sha256').update(body).digest('base64')}'`);
}

/**
 * Headers of every answer of the pages. Everything they draw comes from rollouts (hostile text),
 * so the browser is told to run only the pages' own files and their one inline import map, to load
 * nothing from elsewhere, never to sniff a type, never to be framed (a framed console's Cancel can
 * be clickjacked), and to send no Referer to another origin (`same-origin`, not `no-referrer`, which
 * would also blank the Origin header the server checks on the sign-in form and on Cancel).
 */
function pageHeaders(): Record<string, string> {
  const pages = ['index.html', 'login.html'].map((f) => readFileSync(path.join(WEB_DIR, f), 'utf8'));
  const scripts = pages.flatMap((p) => inlineHashes(p, 'script'));
  const styles = pages.flatMap((p) => inlineHashes(p, 'style'));
  const csp = [
    "default-src 'self'",
    `script-src 'self' ${scripts.join(' ')}`.trim(),
    `style-src 'self' ${styles.join(' ')}`.trim(),
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'content-security-policy': csp,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'same-origin',
  };
}

/**
 * Registers the pages under `/ui`: `/ui` (the page), `/ui/static/*` (its modules and styles) and
 * `/ui/vendor/*` (the libraries), each answer of `app` with the pages' security headers.
 * Authentication is the app's (its onRequest hook runs first).
 */
export async function registerWeb(
  app: FastifyInstance,
  opts: { beforePage?: (req: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined } = {},
): Promise<void> {
  const { files: vendor, inMemory } = vendorFiles();
  const headers = pageHeaders();
  app.addHook('onSend', async (_req, reply, payload) => {
    reply.headers(headers);
    return payload;
  });
  await app.register(fastifyStatic, {
    root: WEB_DIR,
    prefix: '/ui/static/',
    index: false,
    wildcard: true,
    decorateReply: true,
    // The type-checking config sits beside the pages under tsx; it is not one of them.
    allowedPath: (p) => !p.endsWith('tsconfig.json'),
  });
  const page = (req: FastifyRequest, reply: FastifyReply) =>
    opts.beforePage?.(req, reply) ??
    reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').sendFile('index.html', WEB_DIR);
  app.get('/ui', page);
  app.get('/ui/', page);
  app.get('/ui/vendor/*', (req, reply) => {
    const name = (req.params as { '*': string })['*'];
    const text = inMemory.get(name);
    if (text !== undefined) return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(text);
    const file = vendor.get(name);
    if (!file)
      throw new RaasError('route_not_found', `no console library ${JSON.stringify(name)}: the pages import only those of src/ui/assets.ts`);
    return reply.sendFile(path.basename(file), path.dirname(file), { maxAge: 3_600_000 });
  });
}
