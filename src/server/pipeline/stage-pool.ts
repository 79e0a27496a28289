import type { Job, Stage } from './job.js';

/**
 * One stage's FIFO queue and worker pool. `size` workers run `work(job)`; a job removed from the
 * queue (cancelled while waiting) is never started.
 */
export class StagePool {
  private readonly queue: Job[] = [];
  private head = 0;
  busy = 0;

  constructor(
    readonly stage: Stage,
    readonly size: number,
    private readonly work: (job: Job) => Promise<void>,
  ) {}

  /** Jobs waiting in this queue. */
  get depth(): number {
    return this.queue.length - this.head;
  }

  push(job: Job): void {
    this.queue.push(job);
    this.pump();
  }

  /** Takes a waiting job out of the queue; false when it was not waiting here. */
  remove(job: Job): boolean {
    const i = this.queue.indexOf(job, this.head);
    if (i < 0) return false;
    this.queue.splice(i, 1);
    return true;
  }

  /** Every waiting job, in order. */
  waiting(): Job[] {
    return this.queue.slice(this.head);
  }

  /** A worker's stage ended: take the next waiting job. */
  private readonly release = (): void => {
    this.busy--;
    this.pump();
  };

  private pump(): void {
    while (this.busy < this.size && this.head < this.queue.length) {
      const job = this.queue[this.head++];
      // Compact now and then so the array does not grow without bound.
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.busy++;
      // work() never rejects (stage failures are data), but a bug must not leak a worker.
      this.work(job).then(this.release, this.release);
    }
  }
}
