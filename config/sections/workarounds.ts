/**
 * The `[workarounds]` section: nova's switches for behaviour that helps on some deployments and
 * harms on others, with nova's names and defaults (off).
 *
 * It is: declarations only (the QEMU driver reads them in `virt-drivers/qemu/options.ts`). It is
 * not: a place for the agent's own tuning, which lives in the section of the part it tunes.
 */
import { z } from 'zod';
import { bool, int, option } from '../types';

export const workaroundsSection = z.object({
  enable_qemu_monitor_announce_self: option(bool(), {
    help:
      "After a live migration, have QEMU announce the guest again on the destination (QMP announce-self: RARP " +
      "frames, and the guest's own gratuitous ARP and neighbour advertisements) once the move has ended, beyond " +
      'the announcement QEMU makes when the guest starts running there. For switches that learnt the old path ' +
      'late. Off by default, as in nova: each announcement interrupts the guest.',
    default: 'false',
    expected: 'true or false',
  }),
  qemu_monitor_announce_self_count: option(int(1), {
    help: 'How many times the announcement is sent when enable_qemu_monitor_announce_self is on.',
    default: '3',
    expected: 'an integer >= 1',
  }),
  qemu_monitor_announce_self_interval: option(int(1), {
    help: 'Seconds between two announcements when enable_qemu_monitor_announce_self is on.',
    default: '1',
    expected: 'an integer >= 1 (seconds)',
  }),
});
