import { describe, expect, it } from 'vitest';
import { EventLog } from '../../src/ui/event-log.js';

describe('EventLog: the bounded, numbered log behind GET /events', () => {
  it('numbers events from 1 and replays exactly those after an id while the ring holds them', () => {
    const log = new EventLog<string>(4);
    expect(log.lastId).toBe(0);
    expect(log.since(0)).toEqual([]);
    for (const s of ['a', 'b', 'c']) log.emit('x', s);
    expect(log.lastId).toBe(3);
    expect(log.since(1)!.map((e) => [e.id, e.data])).toEqual([
      [2, 'b'],
      [3, 'c'],
    ]);
    expect(log.since(3)).toEqual([]);
  });

  it('answers undefined (the client must re-read) once the events after its id left the ring, or for an id it never gave', () => {
    const log = new EventLog<number>(4);
    for (let i = 1; i <= 10; i++) log.emit('n', i);
    expect(log.oldestId).toBe(7);
    // Resuming from 6 needs 7..10: all still held.
    expect(log.since(6)!.map((e) => e.data)).toEqual([7, 8, 9, 10]);
    // Resuming from 5 needs 6, which is gone.
    expect(log.since(5)).toBeUndefined();
    expect(log.since(11)).toBeUndefined();
    expect(log.since(-1)).toBeUndefined();
    expect(log.since(2.5)).toBeUndefined();
  });

  it('hands every event to subscribers in order and drops a subscriber that throws without failing the emitter', () => {
    const log = new EventLog<number>(8);
    const seen: number[] = [];
    const off = log.subscribe((e) => seen.push(e.id));
    log.subscribe(() => {
      throw new Error('a broken reader');
    });
    log.emit('n', 1);
    log.emit('n', 2);
    expect(seen).toEqual([1, 2]);
    expect(log.subscribers).toBe(1);
    off();
    log.emit('n', 3);
    expect(seen).toEqual([1, 2]);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new EventLog(0)).toThrow(/positive integer/);
  });
});
