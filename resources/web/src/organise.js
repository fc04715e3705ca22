// What a person changes about a run from the web (issue 33): its tags, its note, its name, and its
// deletion, asked for in the page before anything is deleted. One panel, shown on the run page;
// each change is one write to the API (POST /runs/ID/tags, /note, /name; DELETE /runs/ID).

import { sendJson } from './api.js';
import { el, errorBox } from './dom.js';

// `run`: the run as the API gives it ({id, name, tags, note}); `onChanged()` after a change the
// page shows elsewhere (the name), `onDeleted(result)` after a deletion, with the rows deleted per
// table.
export function organisePanel(run, { onChanged = () => {}, onDeleted = () => {} } = {}) {
  const state = { name: run.name, tags: [...(run.tags || [])], note: run.note || '' };
  const message = el('div', { class: 'organise-message', id: 'organise-message' });
  const say = (text) => message.replaceChildren(text ? el('span', { class: 'muted' }, text) : '');
  const fail = (error) => message.replaceChildren(errorBox(error));

  const tagList = el('span', { class: 'tag-list', id: 'run-tags' });
  function drawTags() {
    tagList.replaceChildren(...state.tags.map((tag) => el('span', { class: 'tag', 'data-tag': tag }, tag,
      el('button', { class: 'tag-remove', title: `remove the tag ${tag}`, onclick: () => changeTags([], [tag]) }, '×'))));
  }
  async function changeTags(add, remove) {
    try {
      ({ tags: state.tags } = await sendJson('POST', `runs/${run.id}/tags`, { add, remove }));
      drawTags();
      say('tags saved');
    } catch (error) {
      fail(error);
    }
  }
  const tagInput = el('input', { id: 'tag-input', placeholder: 'add tags (space-separated), Enter',
    onkeydown: (event) => {
      if (event.key !== 'Enter') return;
      const add = tagInput.value.split(/\s+/).filter((t) => t);
      tagInput.value = '';
      if (add.length) changeTags(add, []);
    } });

  const nameInput = el('input', { id: 'rename-input', value: state.name });
  const renameButton = el('button', { id: 'rename-button', onclick: async () => {
    try {
      await sendJson('POST', `runs/${run.id}/name`, { name: nameInput.value });
      state.name = nameInput.value;
      say('renamed');
      onChanged();
    } catch (error) {
      fail(error);
    }
  } }, 'Rename');

  const note = el('textarea', { id: 'note-input', rows: 2, placeholder: 'a note about this run' });
  note.value = state.note;
  const noteButton = el('button', { id: 'note-button', onclick: async () => {
    try {
      await sendJson('POST', `runs/${run.id}/note`, { note: note.value });
      say(note.value ? 'note saved' : 'note cleared');
    } catch (error) {
      fail(error);
    }
  } }, 'Save note');

  // Deleting asks in the page first: the question names the run, and only its button deletes.
  const confirmBox = el('span', { class: 'delete-confirm' });
  const deleteButton = el('button', { id: 'delete-button', class: 'danger', onclick: () => {
    confirmBox.replaceChildren(
      el('span', {}, `Delete run ${run.id} (${state.name}) and all its rows? `),
      el('button', { id: 'delete-confirm', class: 'danger', onclick: async () => {
        try {
          onDeleted(await sendJson('DELETE', `runs/${run.id}`));
        } catch (error) {
          confirmBox.replaceChildren();
          fail(error);
        }
      } }, 'Delete'),
      el('button', { id: 'delete-cancel', onclick: () => confirmBox.replaceChildren() }, 'Cancel'));
  } }, 'Delete run…');

  drawTags();
  return el('div', { class: 'organise', id: 'organise' },
    el('div', { class: 'organise-row' }, el('span', { class: 'label' }, 'Tags'), tagList, tagInput),
    el('div', { class: 'organise-row' }, el('span', { class: 'label' }, 'Name'), nameInput, renameButton,
      deleteButton, confirmBox),
    el('div', { class: 'organise-row' }, el('span', { class: 'label' }, 'Note'), note, noteButton),
    message);
}

// The runs list's tag cell: the tags as small labels.
export function tagCells(tags) {
  return (tags || []).map((tag) => el('span', { class: 'tag' }, tag));
}

// What a deletion removed: "Run 3 deleted: 1,234 rows (steps 600, comm_events 400, ...)".
export function deletedNotice(result) {
  const tables = Object.entries(result.rows || {}).map(([table, rows]) => `${table} ${rows}`).join(', ');
  return el('div', { class: 'notice', id: 'deleted-notice' },
    `Run ${result.run} deleted: ${result.total} rows (${tables}). `, el('a', { href: '#/runs' }, 'Back to the runs'));
}
