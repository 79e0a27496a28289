import { describe, expect, it } from 'vitest';
import { allowedIdentity, backendIdentity, identityAllowed } from '../../src/server/tenants/backend-identity.js';

describe('backend identities and allow-lists (tenants[].allowed_backends)', () => {
  it('one server under several spellings is one identity', () => {
    const id = backendIdentity('http://127.0.0.1:8000');
    for (const a of ['http://localhost:8000', 'http://127.1:8000/', 'http://[::1]:8000', 'HTTP://LOCALHOST:8000/v1'])
      expect(backendIdentity(a), a).toBe(id);
    expect(backendIdentity('http://gpu-1:8000')).toBe('gpu-1:8000');
    expect(backendIdentity('http://gpu-1')).toBe('gpu-1:80');
  });

  it('an entry names one address, or every port of a host with :*', () => {
    const list = ['http://gpu-1:8000', 'http://GPU-2:*', 'http://localhost:9000'].map(allowedIdentity);
    expect(list).toEqual(['gpu-1:8000', 'gpu-2:*', 'this-host:9000']);
    expect(identityAllowed(list, backendIdentity('http://gpu-1:8000/v1'))).toBe(true);
    expect(identityAllowed(list, backendIdentity('http://gpu-1:8001'))).toBe(false);
    expect(identityAllowed(list, backendIdentity('http://gpu-2:30000'))).toBe(true);
    expect(identityAllowed(list, backendIdentity('http://127.0.0.1:9000'))).toBe(true);
    expect(identityAllowed(list, backendIdentity('http://gpu-3:8000'))).toBe(false);
  });
});
