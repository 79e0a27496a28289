import type { SandboxConfig } from '../../../protocol/config-sandbox.js';
import { ApptainerStrategy } from './apptainer.js';
import { BwrapStrategy } from './bwrap.js';
import { ProcessStrategy } from './process.js';
import type { RuntimeStrategy } from './types.js';

export type { ImageRoot, PreparedHost, RuntimeStrategy } from './types.js';

/** The strategy of the runtime a sandbox config names. */
export function strategyFor(c: SandboxConfig): RuntimeStrategy {
  switch (c.runtime) {
    case 'bwrap':
      return new BwrapStrategy(c);
    case 'apptainer':
      return new ApptainerStrategy(c);
    case 'process':
      return new ProcessStrategy(c);
  }
}
