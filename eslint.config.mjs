// ESLint: typescript-eslint's strict, type-aware rules over the library, its tests, the benchmarks and the
// console's page; eslint-config-prettier last, so that layout is Prettier's alone.
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  globalIgnores([
    'dist/',
    'target/',
    'vendor/',
    'npm/',
    'docs/',
    'examples/',
    'binding.js',
    'binding.d.ts',
    'bench/results/',
    '__test__/output/',
    // Peers' own specs, ported as written (their style and types are theirs): see __test__/peers/CHANGES.md.
    '__test__/peers/',
  ]),
  {
    files: ['lib/**/*.ts', 'lib/console/assets/*.js', '__test__/**/*.ts', 'bench/**/*.ts'],
    extends: [eslint.configs.recommended, tseslint.configs.strictTypeChecked, tseslint.configs.stylisticTypeChecked],
    languageOptions: {
      // tsconfig.json's program: the library, the console's page (JavaScript with JSDoc types), tests and benchmarks.
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A leading underscore marks a parameter a signature needs and the body does not (amqplib's nack, Nest's hooks).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      // A number prints exactly as written, in a template or after a string; null, undefined and objects stay refused.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/restrict-plus-operands': ['error', { allowNumberAndString: true }],
      // `() => resolve(x)` returning void is the usual callback shape; a void value used anywhere else stays refused.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // It rewrites `x as T` into `x!`, which no-non-null-assertion (strict) refuses: the two contradict.
      '@typescript-eslint/non-nullable-type-assertion-style': 'off',
      // NestJS modules are classes with no members or only a static forRoot, decorated by a call in lib/ (built without
      // experimentalDecorators) and by @Module in tests.
      '@typescript-eslint/no-extraneous-class': ['error', { allowWithDecorator: true, allowStaticOnly: true }],
      // The library checks at run time what its types already say, for JavaScript callers, hostile producers and the
      // broker's answers, and flags set inside callbacks; the rule calls each such check unnecessary.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // An empty string (an unset environment variable, a nameless class) falls back as a missing one does.
      '@typescript-eslint/prefer-nullish-coalescing': ['error', { ignorePrimitives: { string: true } }],
      // `json<T>()` and `unwrap<T>()` let the caller name what it expects, as Nest's ClientProxy.unwrap<T>() does.
      '@typescript-eslint/no-unnecessary-type-parameters': 'off',
      // Nest's options are typed as classes that Nest's own documentation fills with object literals.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
    },
  },
  {
    // Tests and benchmarks: the rules below guard a library's own code, and here they refuse what a test must do.
    files: ['__test__/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // amqplib's message properties and headers, and Jest's asymmetric matchers (expect.any, stringContaining), are typed `any`.
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // A test reads a value it has just asserted to be there.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Handlers are written `async`, as users write them, whether or not they await.
      '@typescript-eslint/require-await': 'off',
      // Loggers, listeners and handlers that do nothing on purpose.
      '@typescript-eslint/no-empty-function': 'off',
      // Tests throw and reject with strings, symbols and odd objects on purpose, to see that the library copes.
      '@typescript-eslint/only-throw-error': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      // Errors are spread to see every own property they carry, and amqplib's field objects to build hostile frames.
      '@typescript-eslint/no-misused-spread': 'off',
      // NestJS's @EventPattern resolves as a method decorator only with its `<string>` default written out.
      '@typescript-eslint/no-unnecessary-type-arguments': 'off',
    },
  },
  {
    // NestJS's own specs, ported: their code stays as upstream wrote it, so that the port shows only the swap.
    files: ['__test__/peers/nest/**/*.ts'],
    rules: {
      // Upstream types request bodies and the supertest server `any`.
      '@typescript-eslint/no-explicit-any': 'off',
      // Upstream's empty constructor and its `tap({ error: () => client.close() })`.
      '@typescript-eslint/no-useless-constructor': 'off',
      '@typescript-eslint/no-misused-promises': 'off',
    },
  },
  {
    // The path every delivery takes: V8 copies a spread object on a slow path, which cost about a microsecond per
    // failure in `failureOf` and again in `Settlements.fail`. Objects built here are written field by field.
    // Speed, bought: the failure path's client CPU per 10k 0.336 -> 0.292 s (0.87x) on `../shared/bench/pinned.sh`
    // (`npm run bench:js-path`: 8.98 -> 6.34 us per failure); docs/performance.md, "Failures built field by field".
    files: ['lib/consumer/handling.ts', 'lib/consumer/settlement.ts', 'lib/consumer/failure.ts', 'lib/wire.ts', 'lib/message.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ObjectExpression > SpreadElement',
          message: 'The delivery path builds objects field by field: V8 copies a spread object on a slow path (see docs/performance.md).',
        },
      ],
    },
  },
  {
    files: ['lib/console/assets/*.js'],
    // The console's page: browser modules.
    languageOptions: { sourceType: 'module', globals: globals.browser },
  },
  {
    // Node's own scripts: the test fixtures run as plain JavaScript, the build and check scripts, the tools' configs.
    files: ['__test__/**/*.js', 'scripts/**/*.{js,cjs}', '*.{js,cjs}'],
    extends: [eslint.configs.recommended],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
  },
  {
    files: ['scripts/**/*.mjs', '*.mjs'],
    extends: [eslint.configs.recommended],
    languageOptions: { sourceType: 'module', globals: globals.node },
  },
  prettier,
);
