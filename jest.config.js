/** Jest runs the TypeScript tests in __test__/ against the real broker (AMQP_URL). */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/**/*.test.ts'],
  testTimeout: 30000,
};
