/** The cluster suite (`npm run test:cluster`): kills nodes of the three-node cluster of scripts/cluster.sh; run it alone. */
module.exports = {
  ...require('./jest.config'),
  testMatch: ['<rootDir>/__test__/cluster/**/*.cluster.ts'],
  testTimeout: 600000,
};
