/** The fault suite (`npm run test:faults`): restarts this machine's broker; run it alone. */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/faults/**/*.fault.ts'],
  testTimeout: 240000,
};
