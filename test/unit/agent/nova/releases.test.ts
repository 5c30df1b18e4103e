// The nova releases the agent registers as: which one each control plane gets (auto and
// configured), what each promises (service version, compute RPC, object manifest read from nova's
// source), and the option that names them.
import { chooseRelease, EPOXY, NOVA_RELEASES, releaseOf, ServiceVersionError, ZED } from '../../../../agent/nova/releases';
import { serviceVersion } from '../../../../config/types';

const refusal = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    if (e instanceof ServiceVersionError) return e.message;
    throw e;
  }
  throw new Error('not refused');
};

describe('auto: the release nova-conductor runs', () => {
  test.each([
    [64, 'zed'],
    [65, 'zed'],
    [68, '2025.1'],
  ])('conductor at %i registers as %s, without a warning', (cp, name) => {
    expect(chooseRelease('auto', cp)).toEqual({ release: NOVA_RELEASES.find((r) => r.name === name) });
  });

  test('a conductor newer than 2025.1 (2025.2 is 70) gets 68, which it supports, with a warning', () => {
    const c = chooseRelease('auto', 70);
    expect(c.release).toBe(EPOXY);
    expect(c.warning).toMatch(/service version 70, newer than 2025.1 \(68\)/);
  });

  test.each([66, 67])('a 2023.1-2024.2 conductor (%i) is refused: no implemented release fits it', (cp) => {
    expect(refusal(() => chooseRelease('auto', cp))).toMatch(new RegExp(`^DEFAULT.nova_service_version = auto: nova-conductor runs service version ${cp} \\(2023.1 to 2024.2\\); the agent implements service versions 64 \\(Zed\\) and 68 \\(2025.1\\) only`));
  });

  test('a conductor older than Zed, or one that did not answer, is refused naming the option', () => {
    expect(refusal(() => chooseRelease('auto', 61))).toMatch(/service version 61, older than Zed \(64\)/);
    expect(refusal(() => chooseRelease('auto', undefined))).toMatch(/did not report its service version; set DEFAULT.nova_service_version to 64 \(Zed\) or 68 \(2025.1\)/);
    expect(refusal(() => chooseRelease('auto', 0))).toMatch(/did not report/);
  });
});

describe('configured', () => {
  test('the configured release is used as is when the conductor matches or did not answer', () => {
    expect(chooseRelease(64, 64)).toEqual({ release: ZED });
    expect(chooseRelease(68, 68)).toEqual({ release: EPOXY });
    expect(chooseRelease(68, undefined)).toEqual({ release: EPOXY });
  });

  test("newer than the conductor is refused: the conductor cannot read that release's objects", () => {
    expect(refusal(() => chooseRelease(68, 64))).toBe(
      "DEFAULT.nova_service_version = 68 (2025.1) but nova-conductor runs service version 64: an older conductor cannot read 2025.1's objects; expected auto or 64",
    );
  });

  test('older than the conductor registers, with a warning that such a control plane refuses old computes at its restart', () => {
    const c = chooseRelease(64, 68);
    expect(c.release).toBe(ZED);
    expect(c.warning).toMatch(/refuses to start with computes older than its oldest supported release/);
  });

  test('a version the agent does not implement is refused', () => {
    expect(refusal(() => chooseRelease(66, 66))).toBe('DEFAULT.nova_service_version = 66: the agent implements service versions 64 (Zed) and 68 (2025.1) only; expected auto, 64 or 68');
  });
});

describe('what each release promises', () => {
  test('service versions and compute RPC as nova 31 maps them (SERVICE_VERSION_HISTORY, VERSION_ALIASES)', () => {
    expect(NOVA_RELEASES.map((r) => [r.name, r.serviceVersion, r.computeRpc])).toEqual([
      ['zed', 64, '6.1'],
      ['2025.1', 68, '6.4'],
    ]);
    expect(releaseOf(64)).toBe(ZED);
    expect(releaseOf(66)).toBeUndefined();
  });

  test("the manifests are nova's: the classes changed between Zed and 2025.1 and those that did not", () => {
    expect(Object.keys(ZED.objects)).toHaveLength(106);
    expect([ZED.objects.Instance, EPOXY.objects.Instance]).toEqual(['2.7', '2.8']);
    expect([ZED.objects.Migration, EPOXY.objects.Migration]).toEqual(['1.7', '1.8']);
    expect([ZED.objects.ComputeNode, EPOXY.objects.ComputeNode]).toEqual(['1.19', '1.19']);
    expect([ZED.objects.Service, EPOXY.objects.Service]).toEqual(['1.22', '1.22']);
    expect(EPOXY.objects.ShareMapping).toBe('1.2');
    // Every Zed class is in 2025.1 at the same or a newer version: Zed's manifest is safe to send before the choice.
    for (const [name, v] of Object.entries(ZED.objects)) {
      const [a = 0, b = 0] = v.split('.').map(Number);
      const [x = 0, y = 0] = (EPOXY.objects[name] ?? '0.0').split('.').map(Number);
      expect(x > a || (x === a && y >= b)).toBe(true);
    }
  });

  test('[DEFAULT] nova_service_version takes auto and exactly the implemented service versions', () => {
    const parse = (v: string) => serviceVersion().safeParse(v);
    expect(parse('auto').data).toBe('auto');
    expect(parse(' AUTO ').data).toBe('auto');
    for (const r of NOVA_RELEASES) expect(parse(String(r.serviceVersion)).data).toBe(r.serviceVersion);
    expect(parse('66').error?.issues[0]?.message).toBe('not a service version the agent implements');
    expect(parse('zed').error?.issues[0]?.message).toBe('neither auto nor a service version');
  });
});
