/**
 * Jest runs the TypeScript tests in __test__/ against the real broker (AMQP_URL).
 *
 * The tests are CommonJS, and NestJS 12 ships only ES modules. Node (20.19 and later)
 * loads those with require(), but Jest's module registry does so only on Node 24.9 and
 * later, with --experimental-vm-modules, so @swc/jest compiles NestJS's files to
 * CommonJS: node_modules stays untransformed except @nestjs/.
 */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/**/*.test.ts'],
  testTimeout: 30000,
  transform: {
    // ts-jest compiles to CommonJS whatever tsconfig.json's `module` (node20); 151002 is
    // its notice that it does so. Peers' specs (__test__/peers/) are ported as written, with
    // their looser types: compiled, not type-checked. (One ts-jest entry: two would share
    // the options of whichever compiled first.)
    '^.+\\.ts$': ['ts-jest', { diagnostics: { ignoreCodes: [151002], exclude: ['**/__test__/peers/**'] } }],
    '^.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'ecmascript' } }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!@nestjs/)'],
};
