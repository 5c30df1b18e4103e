/**
 * The `[fake]` section: options of the fake virt driver (`compute_driver = fake`), which reports a
 * described or probed host and keeps its instances in memory or in a file.
 *
 * It is: declarations only. It is not: read by any other driver.
 */
import { z } from 'zod';
import { option, optPath } from '../types';

export const fakeSection = z.object({
  instances_file: option(optPath(), {
    help:
      'Where the fake hypervisor keeps its instances, so they outlive an agent restart as real VMs do (crash tests set it, ' +
      'e.g. $state_path/fake-instances.json). Empty keeps them in memory only: they vanish with the agent.',
    default: '',
    expected: 'an absolute path, or empty',
  }),
  host_file: option(optPath(), {
    help: 'YAML or JSON file describing the host the fake driver reports (CPU, memory, disk, GPUs, NICs, NUMA, sharing storage); re-read when it changes. Empty: the fake driver reports the real host from its probes.',
    default: '',
    expected: 'an absolute path',
  }),
});
