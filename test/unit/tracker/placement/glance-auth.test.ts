import nock from 'nock';
import { loadConfig } from '../../../../config/loader';
import { glanceAuthFromConfig } from '../../../../tracker/placement/factory';

const KS = 'https://keystone.test:5000';
const CATALOG = [
  { type: 'placement', endpoints: [{ interface: 'internal', region: 'R1', url: 'http://placement.internal:8778' }] },
  {
    type: 'image',
    endpoints: [
      { interface: 'public', region: 'R1', url: 'https://glance.public/' },
      { interface: 'internal', region: 'R1', url: 'http://glance.r1:9292' },
      { interface: 'internal', region: 'R2', url: 'http://glance.r2:9292' },
    ],
  },
];

function config(env: Record<string, string>) {
  return loadConfig({
    files: [],
    env: { COMPUTE_AGENT__DEFAULT__STATE_PATH: '/nonexistent/state', ...env },
    defaultFile: '/nonexistent/compute-agent.conf',
  }).config;
}

const KEYSTONE = {
  COMPUTE_AGENT__PLACEMENT__AUTH_TYPE: 'password',
  COMPUTE_AGENT__PLACEMENT__AUTH_URL: `${KS}/v3`,
  COMPUTE_AGENT__PLACEMENT__USERNAME: 'agent',
  COMPUTE_AGENT__PLACEMENT__PASSWORD: 'pw',
  COMPUTE_AGENT__PLACEMENT__PROJECT_NAME: 'service',
  COMPUTE_AGENT__PLACEMENT__REGION_NAME: 'R1',
  COMPUTE_AGENT__PLACEMENT__ENDPOINT_OVERRIDE: 'http://placement.fixed:8778',
};

afterEach(() => nock.cleanAll());

describe('glanceAuthFromConfig', () => {
  test('noauth placement: no keystone for Glance (endpoint_override alone is used)', () => {
    expect(glanceAuthFromConfig(config({}))).toBeUndefined();
  });

  test("[placement]'s credentials, the image endpoint picked by [glance]'s interfaces and region, not placement's override", async () => {
    const scope = nock(KS)
      .post('/v3/auth/tokens', (b: { auth: { identity: { password: { user: { name: string } } } } }) => b.auth.identity.password.user.name === 'agent')
      .reply(201, { token: { expires_at: '2099-01-01T00:00:00Z', catalog: CATALOG } }, { 'X-Subject-Token': 'tok' });
    const auth = glanceAuthFromConfig(config({ ...KEYSTONE, COMPUTE_AGENT__GLANCE__REGION_NAME: 'R2' }));
    expect(await auth?.endpoint()).toBe('http://glance.r2:9292');
    expect(await auth?.token()).toBe('tok');
    scope.done();
    nock(KS).post('/v3/auth/tokens').reply(201, { token: { expires_at: '2099-01-01T00:00:00Z', catalog: CATALOG } }, { 'X-Subject-Token': 'tok' });
    const pub = glanceAuthFromConfig(config({ ...KEYSTONE, COMPUTE_AGENT__GLANCE__VALID_INTERFACES: 'admin,public' }));
    expect(await pub?.endpoint()).toBe('https://glance.public');
  });

  test('[glance] endpoint_override wins; a catalog without an image endpoint names [glance]', async () => {
    expect(await glanceAuthFromConfig(config({ ...KEYSTONE, COMPUTE_AGENT__GLANCE__ENDPOINT_OVERRIDE: 'http://glance.fixed:9292/' }))?.endpoint()).toBe('http://glance.fixed:9292');
    nock(KS).post('/v3/auth/tokens').reply(201, { token: { expires_at: '2099-01-01T00:00:00Z', catalog: CATALOG.slice(0, 1) } }, { 'X-Subject-Token': 'tok' });
    await expect(glanceAuthFromConfig(config(KEYSTONE))?.endpoint()).rejects.toThrow(/no image endpoint for interfaces internal,public; set \[glance\] endpoint_override/);
  });
});
