/** Writes the tick guest (a 512-byte boot sector printing a counter on COM1) to the path given. */
import { writeTickImage } from '../test/helpers/tick-guest';

const out = process.argv[2];
if (!out) {
  process.stderr.write('usage: tick-image <path>\n');
  process.exit(2);
}
writeTickImage(out);
