/**
 * The key of a job id in the pipeline's maps: the id itself on a server without tenants (scope
 * ''), else prefixed with its tenant, so two tenants' job ids never meet (both trainers may be
 * called `run` and number their jobs alike).
 */
export function scopedKey(scope: string, jobId: string): string {
  return scope === '' ? jobId : `${scope}\u0000${jobId}`;
}
