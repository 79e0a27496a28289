// examples/write-file/write-file.sim.ts: how the simulated model plays a write_file row (embedded.sim.policies, raas sim-llm --policy)
import type { TaskScript } from 'raas';

interface WriteFileRow {
  path: string;
  content: string;
}

const create = (row: WriteFileRow, text: string) => ({
  say: `I will create ${row.path}.`,
  name: 'str_replace_editor',
  arguments: { command: 'create', path: `/workspace/${row.path}`, file_text: text },
});
const finish = { say: 'The file is written.', name: 'finish', arguments: { message: 'done' } };

// The simulator finds a row by the text its prompt must contain (the handler's user message), then
// plays `right` with the row's seeded success probability (rising with each weight update), else `wrong`.
const script: TaskScript<WriteFileRow> = {
  data_source: ['write_file', 'touch'],
  match: (row) => `Create /workspace/${row.path} whose content is exactly:\n${row.content}`,
  right: (row) => [create(row, row.content), finish],
  wrong: (row) => [create(row, row.content.slice(0, -1)), finish],
};

export default script;
