/**
 * In-flight claims: allocations this agent has decided to make (a spawn, the destination side of a
 * move) held in memory and counted on top of the cached Placement view until a read of Placement
 * shows them. A refreshed view can therefore never make the host look emptier than it is (nova bug
 * 1341420: the periodic audit rebuilt usage from a read that predated a claim, and the next build
 * was placed on capacity that was already promised).
 *
 * The local capacity check here runs before the driver is called; Placement's own check on the
 * allocation write stays the authority. Not synchronized: used from the event loop only, every
 * method is synchronous. Owned by the claim service (`service.ts`); nothing else records claims.
 */
import type { Resources } from '../../model/provider-types';
import type { PlacementView } from '../sync/view';
import { InsufficientResourcesError, InvalidClaimError } from './errors';

export interface Claim {
  readonly consumer: string;
  /** provider uuid -> resources */
  readonly allocations: Readonly<Record<string, Resources>>;
  readonly since: number;
}

export class ClaimBook {
  private readonly claims = new Map<string, Claim>();
  /** consumer -> providers on which a Placement read has shown the claim */
  private readonly seen = new Map<string, Set<string>>();

  constructor(private readonly view: PlacementView, private readonly now: () => number = Date.now) {}

  /**
   * Checks that `allocations` fit what the cache says is free (counting other in-flight claims),
   * then records the claim. Replaces an earlier claim of the same consumer.
   * @throws InsufficientResourcesError, InvalidClaimError
   */
  claim(consumer: string, allocations: Readonly<Record<string, Resources>>): Claim {
    for (const [rp, resources] of Object.entries(allocations)) {
      const inv = this.view.known(rp, 'inventories');
      if (!inv) throw new InvalidClaimError(`provider ${rp} is not part of this host's tree`);
      for (const [rc, amount] of Object.entries(resources)) {
        if (amount === 0) continue;
        const rec = inv[rc];
        if (!rec) throw new InvalidClaimError(`provider ${rp} has no ${rc} inventory`);
        if (amount < rec.min_unit || amount > rec.max_unit || amount % rec.step_size !== 0) {
          throw new InvalidClaimError(`${amount} ${rc} on ${rp} breaks min_unit ${rec.min_unit}, max_unit ${rec.max_unit}, step_size ${rec.step_size}`);
        }
        const free = this.free(rp, rc, consumer);
        if (amount > free) throw new InsufficientResourcesError(rp, rc, amount, free);
      }
    }
    const c: Claim = { consumer, allocations, since: this.now() };
    this.claims.set(consumer, c);
    this.seen.delete(consumer);
    return c;
  }

  /** Forgets a claim (the operation failed, or finished and Placement shows it). */
  release(consumer: string): void {
    this.claims.delete(consumer);
    this.seen.delete(consumer);
  }

  has(consumer: string): boolean {
    return this.claims.has(consumer);
  }

  /** Consumers with a claim in flight. */
  consumers(): Set<string> {
    return new Set(this.claims.keys());
  }

  /**
   * Takes a fresh read of a provider's allocations: claims it shows are no longer counted on top
   * for that provider; a claim shown on all its providers is dropped.
   */
  reconcile(provider: string, allocations: Readonly<Record<string, Resources>>): void {
    for (const c of this.claims.values()) {
      if (!c.allocations[provider] || !allocations[c.consumer]) continue;
      const s = this.seen.get(c.consumer) ?? new Set<string>();
      s.add(provider);
      this.seen.set(c.consumer, s);
      if (Object.keys(c.allocations).every((rp) => s.has(rp))) this.release(c.consumer);
    }
  }

  /** Used amount of `rc` on `rp`: Placement's last known usage plus claims it does not show yet. */
  used(rp: string, rc: string, except?: string): number {
    const known = this.view.known(rp, 'allocations') ?? {};
    let used = 0;
    for (const [consumer, res] of Object.entries(known)) if (consumer !== except) used += res[rc] ?? 0;
    for (const c of this.claims.values()) {
      if (c.consumer === except || this.seen.get(c.consumer)?.has(rp) || known[c.consumer]) continue;
      used += c.allocations[rp]?.[rc] ?? 0;
    }
    return used;
  }

  /** Free capacity of `rc` on `rp`: (total - reserved) * ratio - used. */
  free(rp: string, rc: string, except?: string): number {
    const rec = this.view.known(rp, 'inventories')?.[rc];
    if (!rec) return 0;
    return Math.floor((rec.total - rec.reserved) * rec.allocation_ratio) - this.used(rp, rc, except);
  }
}
