// Copies the console's page (lib/console/assets/: HTML, CSS, JavaScript modules) to
// dist/console/assets/, beside the compiled module that serves it; `npm run
// build:ts` runs it after the compiler, so the package ships the page.
const { cpSync, mkdirSync, readdirSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const from = join(root, 'lib', 'console', 'assets');
const to = join(root, 'dist', 'console', 'assets');
mkdirSync(to, { recursive: true });
for (const name of readdirSync(from)) cpSync(join(from, name), join(to, name));
