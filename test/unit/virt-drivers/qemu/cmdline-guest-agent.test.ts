// The guest-agent channel on the QEMU command line: present only when the definition asks for it
// (the image's hw_qemu_guest_agent), named as qemu-ga in the guest looks for it, its host end a
// socket in the instance directory, at a slot clear of the display's and the NICs'.
import { GUEST_AGENT_CHANNEL, qemuCommandLine } from '../../../../virt-drivers/qemu/cmdline';
import { instancePaths, vmDefinitionSchema, type VmDefinition } from '../../../../virt-drivers/qemu/instance-files';

const UUID = '11111111-1111-4111-8111-111111111111';
const DEF: VmDefinition = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 64, disk: true, video: 'virtio' };
const paths = instancePaths(`/var/lib/compute-agent/instances/${UUID}`);
const values = (args: string[], flag: string): string[] => args.flatMap((a, i) => (a === flag ? [args[i + 1] as string] : []));

test('a definition with a guest agent: the socket chardev, virtio-serial at slot 3 of the root bus, the org.qemu.guest_agent.0 port on it', () => {
  const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, guestAgent: {} }, paths, sandbox: false });
  expect(paths.guestAgent).toBe(`/var/lib/compute-agent/instances/${UUID}/qga.sock`);
  expect(values(args, '-chardev')).toContain(`socket,id=charchannel0,path=${paths.guestAgent},server=on,wait=off`);
  expect(values(args, '-device')).toEqual(
    expect.arrayContaining([
      'virtio-vga,id=video0,bus=pcie.0,addr=0x2',
      'virtio-serial-pci,id=virtio-serial0,bus=pcie.0,addr=0x3',
      `virtserialport,bus=virtio-serial0.0,nr=1,chardev=charchannel0,id=channel0,name=${GUEST_AGENT_CHANNEL}`,
    ]),
  );
  expect(GUEST_AGENT_CHANNEL).toBe('org.qemu.guest_agent.0');
  const pc = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, machine: 'pc', guestAgent: { adminUser: 'cloud' } }, paths, sandbox: false });
  expect(values(pc, '-device')).toContain('virtio-serial-pci,id=virtio-serial0,bus=pci.0,addr=0x3');
});

test('without one: no virtio-serial device and no channel socket', () => {
  const args = qemuCommandLine({ uuid: UUID, name: 'x', def: DEF, paths, sandbox: false });
  expect(args.join(' ')).not.toMatch(/virtio-serial|virtserialport|charchannel0|qga\.sock/);
});

test('the record keeps it across restarts and moves: the schema takes it with or without an admin user, and refuses an empty one', () => {
  expect(vmDefinitionSchema.parse({ ...DEF, guestAgent: { adminUser: 'cloud' } }).guestAgent).toEqual({ adminUser: 'cloud' });
  expect(vmDefinitionSchema.parse({ ...DEF, guestAgent: {} }).guestAgent).toEqual({});
  expect(vmDefinitionSchema.safeParse({ ...DEF, guestAgent: { adminUser: '' } }).success).toBe(false);
});
