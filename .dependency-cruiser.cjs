/**
 * The structure of lib/, checked by `npm run check:structure` (in `npm test`'s lint stage): no import circle, and
 * no import from a lower layer to a higher one (the layers: scripts/lib-layers.cjs).
 */
const { LAYERS, pathOf } = require('./scripts/lib-layers.cjs');

const layered = LAYERS.slice(0, -1).map(([name, modules], i) => ({
  name: `no-upward-import-from-${name}`,
  comment: `The ${name} layer (${modules.join(', ')}) imports nothing from a layer above it.`,
  severity: 'error',
  from: { path: pathOf(modules) },
  to: { path: pathOf(LAYERS.slice(i + 1).flatMap(([, m]) => m)) },
}));

const parts = LAYERS.find(([name]) => name === 'parts')[1];
const siblings = parts.map((part) => ({
  name: `parts-stand-alone-${part}`,
  comment: `${part} imports no other part (${parts.filter((p) => p !== part).join(', ')}); the client joins them.`,
  severity: 'error',
  from: { path: pathOf([part]) },
  to: { path: pathOf(parts.filter((p) => p !== part)) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules that import each other in a loop: one of them does two jobs, or a piece belongs lower down.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layered,
    ...siblings,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^lib/console/assets/' },
    // Type-only imports count: an upward type import ties the layers as much as a value import.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
