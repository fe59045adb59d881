/** The fault suite (`npm run test:faults`): restarts this machine's broker; run it alone. */
module.exports = {
  ...require('./jest.config'),
  testMatch: ['<rootDir>/__test__/faults/**/*.fault.ts'],
  testTimeout: 240000,
};
