/**
 * Layering rules of raas, checked on the compiled output (`npm run lint:deps` after the build):
 * TypeScript 7 has no JavaScript API for dependency-cruiser to parse .ts with, and the compiled
 * .js files carry exactly the imports that run. Type-only imports are not seen here.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'Import circles make load order and layering accidental.', from: {}, to: { circular: true } },
    {
      name: 'server-not-trainer',
      severity: 'error',
      comment: 'The rollout server is deployed alone: it never imports the trainer half.',
      from: { path: '^dist/src/server' },
      to: { path: '^dist/src/(dapo|client|placement)/' },
    },
    {
      name: 'protocol-imports-nothing-ours',
      severity: 'error',
      comment: 'src/protocol is the shared contract: schemas and error codes only.',
      from: { path: '^dist/src/protocol/' },
      to: { path: '^dist/src/', pathNot: '^dist/src/protocol/' },
    },
    {
      name: 'protocol-no-cli-or-yaml',
      severity: 'error',
      comment: 'The contract does not depend on how a config is read or a command is parsed.',
      from: { path: '^dist/src/protocol/' },
      to: { path: 'node_modules/(yaml|commander)/' },
    },
    {
      name: 'sandboxes-know-no-jobs',
      severity: 'error',
      comment: 'Sandboxes and tools know nothing of jobs, tasks, handlers or the agent.',
      from: { path: '^dist/src/server/(sandbox|tools)/' },
      to: { path: '^dist/src/server/(pipeline|handlers|agent|llm|console)/' },
    },
    {
      name: 'trainer-through-the-public-entry',
      severity: 'error',
      comment: 'The trainer half reaches the server over HTTP, or (embedded mode) through its public entry only.',
      from: { path: '^dist/src/(dapo|client|placement)/' },
      to: { path: '^dist/src/server/', pathNot: '^dist/src/server/index\\.js$' },
    },
    {
      name: 'ui-knows-no-server-or-trainer',
      severity: 'error',
      comment: 'src/ui (pages, event stream, run-directory reader, raas view) is shared: the server wires it in, never the reverse, and a run is read from its files.',
      from: { path: '^dist/src/ui/' },
      to: { path: '^dist/src/(server|dapo|client|placement|sidecar)/' },
    },
    {
      name: 'simulator-never-grades',
      severity: 'error',
      comment: 'The simulator is its own server: it never imports the rollout server.',
      from: { path: '^dist/src/sim/' },
      to: { path: '^dist/src/server/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.d\\.ts$' },
    moduleSystems: ['es6', 'cjs'],
  },
};
