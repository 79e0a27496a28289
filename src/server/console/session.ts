import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Clock } from '../../util/clock.js';

/** The console's session cookie. */
export const SESSION_COOKIE = 'raas_session';

/** One cookie's value from a Cookie header. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Console logins: a browser cannot set an Authorization header on a page load or an EventSource,
 * so signing in with the server's token (the login form, or a `/ui?token=` link) makes a random
 * session id, sent back as an HttpOnly, SameSite=Strict cookie. The cookie stands for the token it
 * was made from: requests that carry it are checked as if they sent that token, so the server's
 * authentication (and, with tenants, who the token is) stays in one place. Sessions live in memory
 * (a restart signs everyone out), expire after `ttlMs` unused, and at most `max` exist.
 */
export class UiSessions {
  private readonly byId = new Map<string, { token: string; seen: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs = 12 * 3600 * 1000,
    private readonly max = 1000,
    /** Sessions of one token: past it that token's oldest goes, so one tenant signing in again and again cannot sign the others out. */
    private readonly perToken = 32,
  ) {}

  /** A new session for a token that was checked; returns its cookie value. */
  create(token: string): string {
    let mine = 0;
    let oldest: string | undefined;
    for (const [k, s] of this.byId)
      if (s.token === token) {
        mine++;
        oldest ??= k;
      }
    if (mine >= this.perToken && oldest !== undefined) this.byId.delete(oldest);
    const id = randomBytes(32).toString('base64url');
    this.byId.set(id, { token, seen: this.clock.now() });
    // The oldest session goes first when there are too many.
    while (this.byId.size > this.max) this.byId.delete(this.byId.keys().next().value!);
    return id;
  }

  /** The token a session cookie stands for (its expiry slides), or undefined. */
  token(id: string | undefined): string | undefined {
    if (!id) return undefined;
    const s = this.byId.get(id);
    if (!s) return undefined;
    const now = this.clock.now();
    if (now - s.seen > this.ttlMs) {
      this.byId.delete(id);
      return undefined;
    }
    s.seen = now;
    return s.token;
  }

  /** Ends a session (the console's sign-out). */
  end(id: string | undefined): void {
    if (id) this.byId.delete(id);
  }

  /** The Set-Cookie value of a session (`''` ends it). */
  static cookie(id: string, maxAgeS: number): string {
    return `${SESSION_COOKIE}=${id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}`;
  }
}

/** How a request presented its credential. */
export interface Credential {
  /** What to check, as an Authorization header value. */
  authorization: string | undefined;
  via: 'header' | 'cookie' | 'query' | 'none';
}

/**
 * The credential of a request: its Authorization header; else its console session cookie; else,
 * for the page itself (`GET /ui?token=…`, a link a user was given), the token in the query.
 */
export function credentialOf(req: FastifyRequest, sessions: UiSessions | undefined): Credential {
  if (req.headers.authorization) return { authorization: req.headers.authorization, via: 'header' };
  const token = sessions?.token(cookieValue(req.headers.cookie, SESSION_COOKIE));
  if (token !== undefined) return { authorization: `Bearer ${token}`, via: 'cookie' };
  const q = (req.query as Record<string, unknown> | undefined)?.token;
  if (req.method === 'GET' && typeof q === 'string' && /^\/ui\/?(\?|$)/.test(req.url))
    return { authorization: `Bearer ${q}`, via: 'query' };
  return { authorization: undefined, via: 'none' };
}

/**
 * A cookie is sent by the browser whatever page asked, so a request authenticated by it may only
 * change something when it comes from the console's own origin (SameSite=Strict already keeps
 * other sites' requests from carrying it; this also covers older browsers).
 */
export function sameOrigin(req: FastifyRequest): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host;
  if (!origin || !host) return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}
