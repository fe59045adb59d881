// @ts-check
// The rabbit-retry console's page. Plain JavaScript modules, no
// dependencies, type-checked with the library (JSDoc types). Every value
// from the broker is written with text nodes (textContent), never parsed
// as HTML.
//
// console.js (this file) starts the page; store.js holds what it knows,
// api.js asks the console, reading.js polls it, actions.js acts,
// edit.js edits one message (diff.js compares it with the original),
// render.js, render-queue.js and timeline.js draw, dom.js builds elements.

import { closeModal } from './actions.js';
import { closeEditor, editing } from './edit.js';
import { TOKEN_KEY, readToken, showLogin } from './api.js';
import { $, input } from './dom.js';
import { poll } from './reading.js';
import { render } from './render.js';
import { S, drawWith } from './store.js';

drawWith(render);

document.addEventListener('DOMContentLoaded', function () {
  $('modal-cancel').addEventListener('click', function () {
    closeModal(false);
  });
  $('modal-ok').addEventListener('click', function () {
    closeModal(true);
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && !$('modal').hidden) closeModal(false);
    else if (e.key === 'Escape' && editing()) closeEditor();
  });
  $('login-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var t = input('login-token').value.trim();
    if (!t) return;
    S.token = t;
    sessionStorage.setItem(TOKEN_KEY, t);
    $('login').hidden = true;
    poll();
  });
  S.token = readToken();
  if (!S.token) showLogin('');
  else poll();
});
