// Two projects: unit tests (fast, no servers) and integration tests (real Placement and RabbitMQ,
// started by test/integration/global-setup.ts when they are not already running).
const common = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      ...common,
      displayName: 'unit',
      // test/drivers: the virt-driver conformance suite (no servers needed).
      testMatch: ['<rootDir>/test/unit/**/*.test.ts', '<rootDir>/test/drivers/**/*.test.ts'],
    },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/integration/global-setup.ts',
      testTimeout: 120000,
    },
  ],
};
