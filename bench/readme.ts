/**
 * Keeps the README's Performance section equal to the latest full `npm run bench`: the table goes
 * between two marker comments, so the prose around it stays hand-written and the numbers are never
 * typed by hand.
 */
export const README_BEGIN = '<!-- bench:begin (written by npm run bench; do not edit by hand) -->';
export const README_END = '<!-- bench:end -->';

/** `readme` with the text between the markers replaced by `table`. @throws Error when the markers are missing or out of order */
export function withBenchTable(readme: string, table: string): string {
  const begin = readme.indexOf(README_BEGIN);
  const end = readme.indexOf(README_END);
  if (begin < 0 || end < 0 || end < begin) throw new Error(`README.md has no "${README_BEGIN}" ... "${README_END}" block to hold the bench table`);
  return `${readme.slice(0, begin + README_BEGIN.length)}\n${table.trim()}\n${readme.slice(end)}`;
}
