/**
 * The text of a thrown value, as logs and faults quote it: an Error's `message`, anything else
 * converted to a string. One definition for the flows that report what went wrong.
 */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
