/**
 * Natural order (nvidia-9 before nvidia-10) through one ICU collator, built on the first
 * comparison. Building a collator maps ICU's collation data into the process, about 3 MB resident
 * for the daemon's whole life; a host with no MIG profiles or mdev types never compares two names,
 * so it never pays for them.
 */
let collator: Intl.Collator | undefined;

export function naturalCompare(a: string, b: string): number {
  collator ??= new Intl.Collator('en', { numeric: true });
  return collator.compare(a, b);
}
