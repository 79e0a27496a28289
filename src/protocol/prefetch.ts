import { z } from 'zod';
import { Instance } from './process.js';

/**
 * POST /prefetch (docs/api.md): the instances a client will submit soon, so the server prepares
 * what their sandboxes need (an instance's image unpacked into the image cache) while the current
 * jobs run, and INIT does not wait for it. A hint: nothing is started, nothing is kept per client,
 * and an instance the server cannot prepare anything for is skipped.
 */
export const PrefetchRequest = z.strictObject({
  instances: z.array(Instance).max(1024),
});
export type PrefetchRequest = z.infer<typeof PrefetchRequest>;

/** POST /prefetch answer: how many instances named something to prepare, and how many did not. */
export const PrefetchResponse = z.looseObject({
  status: z.literal('ok'),
  /** Images whose preparation started or was already done (duplicates counted once). */
  images: z.number().int().nonnegative(),
  /** Instances with nothing to prepare: a handler without images, an unknown data_source, an invalid instance. */
  skipped: z.number().int().nonnegative(),
});
export type PrefetchResponse = z.infer<typeof PrefetchResponse>;
