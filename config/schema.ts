/**
 * Every option the agent reads, with nova's names wherever nova has the option, its type, default,
 * and help text: one module per INI section (or a few related ones) under `sections/`, assembled
 * here in the order the example file lists them. This table is the single source for validation
 * (`loader.ts`), the example file (`compute-agent.conf.example`, checked by a test to document
 * every option here) and the masking of secrets.
 *
 * Defaults are written as they would appear in the file, so `$state_path` interpolation and the
 * example file treat them exactly like operator input.
 */
import { z } from 'zod';
import { defaultSection } from './sections/default';
import { fakeSection } from './sections/fake';
import { glanceSection, imageCacheSection } from './sections/glance';
import { computeSection, devicesSection, networkSection } from './sections/inventory';
import { metricsSection } from './sections/metrics';
import { neutronSection } from './sections/neutron';
import { cinderSection } from './sections/cinder';
import { consoleauthSection, serialConsoleSection, vncSection } from './sections/consoles';
import { osVifOvsSection } from './sections/os-vif';
import { placementSection } from './sections/placement';
import { qemuSection } from './sections/qemu';
import { rabbitSection } from './sections/rabbit';
import { workaroundsSection } from './sections/workarounds';

export { HOST_PROBE_NAMES } from './sections/inventory';

export const configSchema = z.object({
  DEFAULT: defaultSection,
  placement: placementSection,
  compute: computeSection,
  devices: devicesSection,
  network: networkSection,
  fake: fakeSection,
  qemu: qemuSection,
  os_vif_ovs: osVifOvsSection,
  glance: glanceSection,
  image_cache: imageCacheSection,
  neutron: neutronSection,
  cinder: cinderSection,
  vnc: vncSection,
  serial_console: serialConsoleSection,
  consoleauth: consoleauthSection,
  workarounds: workaroundsSection,
  oslo_messaging_rabbit: rabbitSection,
  metrics: metricsSection,
});

/** The validated, typed configuration the agent runs with. */
export type AgentConfig = z.output<typeof configSchema>;
export type SectionName = keyof AgentConfig;
export const SECTION_NAMES = Object.keys(configSchema.shape) as SectionName[];
