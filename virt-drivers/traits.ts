/**
 * Standard trait and resource-class names, and the x86 cpu-flag table, from the JSON that
 * `scripts/gen-os-traits.py` and `scripts/gen-os-resource-classes.py` generate from Debian's
 * python3-os-traits and python3-os-resource-classes (the versions the Debian Placement server
 * knows, so every standard name we emit exists there).
 *
 * It is: lookup tables and name rules. It is not: a Placement client; custom names still have to
 * be created in Placement by the tracker before they are used.
 */
import classesData from './data/os-resource-classes.json';
import traitsData from './data/os-traits.json';
import { CUSTOM_NAME, normalizeCustomName } from '../model/provider-types';

interface CpuFlagRow {
  readonly flag: string;
  readonly trait: string;
  readonly vendor?: string;
}

export const STANDARD_TRAITS: ReadonlySet<string> = new Set(traitsData.traits);
export const STANDARD_RESOURCE_CLASSES: ReadonlySet<string> = new Set(classesData.standard);
export const OS_TRAITS_SOURCE: string = traitsData.source;
export const OS_RESOURCE_CLASSES_SOURCE: string = classesData.source;

const CPU_FLAGS: readonly CpuFlagRow[] = traitsData.x86_cpu_flags;

/** Every trait the cpu-flag table can produce: the CPU traits a driver owns on the root. */
export const CPU_FLAG_TRAITS: ReadonlySet<string> = new Set(CPU_FLAGS.map((r) => r.trait));

/** A standard (os-traits) name or a valid custom name. */
export function isValidTrait(name: string): boolean {
  return STANDARD_TRAITS.has(name) || (CUSTOM_NAME.test(name) && name.length <= 255);
}

/** A standard (os-resource-classes) name or a valid custom name. */
export function isValidResourceClass(name: string): boolean {
  return STANDARD_RESOURCE_CLASSES.has(name) || (CUSTOM_NAME.test(name) && name.length <= 255);
}

/** The standard trait when os-traits has it, else the custom form of the same name. */
export function standardOrCustomTrait(name: string): string {
  return STANDARD_TRAITS.has(name) ? name : normalizeCustomName(name);
}

/**
 * HW_CPU_X86_* traits for /proc/cpuinfo flags. Vendor-qualified traits (HW_CPU_X86_AMD_SSBD vs
 * HW_CPU_X86_INTEL_SSBD) apply only when `vendor` (cpuinfo `vendor_id`) matches.
 */
export function cpuFlagTraits(flags: Iterable<string>, vendor?: string): string[] {
  const have = new Set(flags);
  const out = new Set<string>();
  for (const row of CPU_FLAGS) {
    if (!have.has(row.flag)) continue;
    if (row.vendor !== undefined && row.vendor !== vendor) continue;
    out.add(row.trait);
  }
  return [...out].sort();
}
