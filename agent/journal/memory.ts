/**
 * `InMemoryRequestJournal`: the RequestJournal contract with requests held in memory and the
 * de-duplication window (optionally) persisted in `state_path`. It is the journal the agent runs
 * with until the compute manager's durable journal replaces it.
 *
 * What it guarantees: a request is accepted once per `_unique_id` within the window (in-flight
 * requests are always remembered), across reconnects and, with a persisted window, across
 * restarts. What it does not: a request accepted and acknowledged just before a crash is not run
 * after the restart (the durable journal's recovery does that); with a persisted window its
 * redelivery, if any, is then dropped as a duplicate, which is oslo's at-most-once behaviour.
 */
import { JournalError, type AcceptResult, type JournalRequest, type RequestJournal, type RequestOutcome } from './types';
import type { DedupeWindow } from './dedupe-window';

export interface InMemoryJournalEntry {
  readonly request: JournalRequest;
  readonly acceptedAt: number;
}

export class InMemoryRequestJournal implements RequestJournal {
  private readonly open = new Map<string, InMemoryJournalEntry>();
  private readonly finished: Array<{ readonly uniqueId: string; readonly outcome: RequestOutcome }> = [];

  constructor(
    private readonly window: DedupeWindow,
    private readonly now: () => number = Date.now,
    /** How many finished outcomes `recentOutcomes` keeps (for diagnostics and tests). */
    private readonly keepFinished = 256,
  ) {}

  async accept(request: JournalRequest): Promise<AcceptResult> {
    const id = request.uniqueId;
    if (this.open.has(id) || this.window.has(id)) return 'duplicate';
    this.open.set(id, { request, acceptedAt: this.now() });
    this.window.add(id);
    try {
      await this.window.flush();
    } catch (e) {
      this.open.delete(id);
      this.window.delete(id);
      throw new JournalError(`cannot record request ${id}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    return 'new';
  }

  async complete(uniqueId: string, outcome: RequestOutcome): Promise<void> {
    if (!this.open.delete(uniqueId)) return;
    this.finished.push({ uniqueId, outcome });
    if (this.finished.length > this.keepFinished) this.finished.splice(0, this.finished.length - this.keepFinished);
    await Promise.resolve();
  }

  /** Accepted requests not yet completed, oldest first. */
  inFlight(): readonly InMemoryJournalEntry[] {
    return [...this.open.values()];
  }

  /** The most recent outcomes, oldest first. */
  recentOutcomes(): ReadonlyArray<{ readonly uniqueId: string; readonly outcome: RequestOutcome }> {
    return [...this.finished];
  }
}
