/**
 * golevelup's specs (__test__/peers/golevelup/) a second time, with every handler bound to an exchange written
 * without a queue, as golevelup's users write them: scripts/queueless-transform.js blanks out those `queue`
 * properties as the files compile, and skips the tests __test__/peers/golevelup-queueless.json lists (each with its
 * reason). `npm test` runs it after the main suite; __test__/peers/CHANGES.md has the totals.
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  testMatch: ['<rootDir>/__test__/peers/golevelup/**/*.test.ts'],
  // The queues the handlers derive go before the run and after it (__test__/peers/queueless-queues.ts).
  globalSetup: '<rootDir>/__test__/peers/queueless-queues.ts',
  globalTeardown: '<rootDir>/__test__/peers/queueless-queues.ts',
  transform: {
    ...base.transform,
    '^.+\\.ts$': ['<rootDir>/scripts/queueless-transform.js', base.transform['^.+\\.ts$'][1]],
  },
};
