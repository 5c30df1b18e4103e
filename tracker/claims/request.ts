/**
 * What a flavor asks for, as nova computes it (nova `scheduler/utils.py` ResourceRequest):
 * VCPU = vcpus, MEMORY_MB = memory_mb, DISK_GB = root_gb + ephemeral_gb + swap in GiB rounded up.
 * Extra specs refine it:
 * - `resources:<RC>=N` overrides or adds a class in the unnumbered group (N = 0 removes it);
 * - `resourcesN:<RC>=N` (any suffix after `resources`) forms a numbered group that must come
 *   from a single provider;
 * - `trait:<NAME>=required|forbidden` (any suffix after `trait`) constrains the providers chosen.
 * Other extra specs are not the request's business and are ignored. A malformed value is refused
 * (`InvalidExtraSpecError`), never guessed at.
 *
 * Pure functions; where the request goes on the host's tree is `place.ts`.
 */
import type { Flavor } from '../../model/instance';
import type { Resources } from '../../model/provider-types';
import { InvalidExtraSpecError } from './errors';

export interface RequestGroup {
  readonly resources: Record<string, number>;
  /** True for a numbered group: everything from one provider. */
  readonly sameProvider: boolean;
}

export interface ResourceRequest {
  readonly groups: readonly RequestGroup[];
  readonly required: readonly string[];
  readonly forbidden: readonly string[];
}

const RESOURCES_KEY = /^resources([A-Za-z0-9_-]*):([A-Z0-9_]+)$/;
const TRAIT_KEY = /^trait[A-Za-z0-9_-]*:([A-Z0-9_]+)$/;

/** The request a flavor makes. @throws InvalidExtraSpecError for a malformed extra spec */
export function requestFromFlavor(f: Flavor): ResourceRequest {
  const base: Record<string, number> = {
    VCPU: f.vcpus,
    MEMORY_MB: f.memory_mb,
    DISK_GB: f.root_gb + f.ephemeral_gb + Math.ceil(f.swap / 1024),
  };
  const numbered = new Map<string, Record<string, number>>();
  const required: string[] = [];
  const forbidden: string[] = [];
  for (const [key, value] of Object.entries(f.extra_specs)) {
    const res = RESOURCES_KEY.exec(key);
    if (res) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) throw new InvalidExtraSpecError(key, value, 'an integer >= 0');
      const suffix = res[1] ?? '';
      const target = suffix === '' ? base : (numbered.get(suffix) ?? numbered.set(suffix, {}).get(suffix) ?? {});
      target[res[2] ?? ''] = n;
      continue;
    }
    const trait = TRAIT_KEY.exec(key);
    if (trait) {
      if (value === 'required') required.push(trait[1] ?? '');
      else if (value === 'forbidden') forbidden.push(trait[1] ?? '');
      else throw new InvalidExtraSpecError(key, value, 'required or forbidden');
    }
  }
  const clean = (r: Record<string, number>): Record<string, number> => Object.fromEntries(Object.entries(r).filter(([, n]) => n > 0));
  const groups: RequestGroup[] = [{ resources: clean(base), sameProvider: false }];
  for (const r of numbered.values()) if (Object.keys(clean(r)).length) groups.push({ resources: clean(r), sameProvider: true });
  return { groups, required, forbidden };
}

/** Total amount per class over all groups. */
export function totalsOf(req: ResourceRequest): Record<string, number> {
  return sumPerClass(req.groups.map((g) => g.resources));
}

/** Sums allocations (provider -> resources) per class. */
export function sumAllocations(a: Readonly<Record<string, Resources>>): Record<string, number> {
  return sumPerClass(Object.values(a));
}

function sumPerClass(rows: ReadonlyArray<Readonly<Record<string, number>>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const res of rows) for (const [rc, n] of Object.entries(res)) out[rc] = (out[rc] ?? 0) + n;
  return out;
}
