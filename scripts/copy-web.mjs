// npm run build: tsc compiles the TypeScript but copies no other file, so the console's pages
// (src/ui/web: HTML, CSS, checked ES modules served as they are) are copied next to the build.
import { cpSync, rmSync } from 'node:fs';

rmSync('dist/src/ui/web', { recursive: true, force: true });
cpSync('src/ui/web', 'dist/src/ui/web', { recursive: true, filter: (src) => !src.endsWith('tsconfig.json') });
