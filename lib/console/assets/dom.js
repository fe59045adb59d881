// @ts-check
// Building the page: elements written with text nodes (textContent), never
// parsed as HTML, so no value from the broker can become markup; and the
// formats of numbers, times and durations.

/**
 * What an element may hold: a node or text; null, undefined and false hold nothing.
 * @typedef {Node | string | number | null | undefined | false} Leaf
 */

/** What an element may hold: a {@link Leaf}, or a list of them. @typedef {Leaf | Leaf[]} Child */

/**
 * An element's attributes: `class`, `text` (its text), `on<event>` (a
 * listener), `disabled` and `open` (properties), `style` (an object of
 * properties), and any other attribute; null, undefined and false set nothing.
 * @typedef {Record<string, string | number | boolean | null | undefined | ((e: Event) => void) | Partial<CSSStyleDeclaration>>} Attrs
 */

/**
 * A new element `tag` with `attrs` and `children`.
 * @param {string} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
  var el = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
      else if (k === 'disabled' || k === 'open') Reflect.set(el, k, Boolean(v));
      else if (k === 'style') Object.assign(el.style, v);
      else if (typeof v !== 'object' && typeof v !== 'function') {
        // The rest are text; a listener or a style object under another name sets nothing.
        var text = String(v);
        if (k === 'class') el.className = text;
        else if (k === 'text') el.textContent = text;
        else el.setAttribute(k, text);
      }
    });
  }
  children.forEach(function (c) {
    add(el, c);
  });
  return el;
}

/**
 * Appends `child` to `el`.
 * @param {Node} el
 * @param {Child} child
 */
function add(el, child) {
  if (child === undefined || child === null || child === false) return;
  if (Array.isArray(child)) {
    child.forEach(function (c) {
      add(el, c);
    });
    return;
  }
  el.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
}

/**
 * The page's element `id`.
 * @param {string} id
 * @returns {HTMLElement}
 */
export function $(id) {
  return /** @type {HTMLElement} */ (document.getElementById(id));
}

/**
 * The page's input `id`.
 * @param {string} id
 * @returns {HTMLInputElement}
 */
export function input(id) {
  return /** @type {HTMLInputElement} */ ($(id));
}

/**
 * Replaces what `el` holds with `children`.
 * @param {Node} el
 * @param {...Child} children
 */
export function replace(el, ...children) {
  while (el.firstChild) el.removeChild(el.firstChild);
  children.forEach(function (c) {
    add(el, c);
  });
}

/**
 * A count, with thousands separated; a dash when there is none.
 * @param {unknown} x
 */
export function n(x) {
  return typeof x === 'number' ? x.toLocaleString('en-US') : '–';
}

/** @param {number} x */
function pad(x) {
  return (x < 10 ? '0' : '') + x;
}

/**
 * A time of the day, with its date when it is not today; a dash when there is none.
 * @param {string | null | undefined} iso
 */
export function when(iso) {
  if (!iso) return '–';
  var d = new Date(iso);
  if (isNaN(d.getTime())) return iso;
  var t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  var now = new Date();
  if (d.toDateString() === now.toDateString()) return t;
  return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
}

/**
 * A duration in its largest fitting unit.
 * @param {number} x milliseconds
 */
export function ms(x) {
  if (x < 1000) return x + ' ms';
  if (x < 60000) return (x / 1000).toFixed(1) + ' s';
  if (x < 3600000) return Math.round(x / 60000) + ' min';
  return (x / 3600000).toFixed(1) + ' h';
}

/**
 * A tile of a count: its label, its value, and a line under it.
 * @param {string} label
 * @param {string} value
 * @param {string} [cls]
 * @param {string} [sub]
 */
export function tile(label, value, cls, sub) {
  return h(
    'div',
    { class: 'tile' + (cls ? ' ' + cls : '') },
    h('span', { class: 'label', text: label }),
    h('span', { class: 'value', text: value }),
    sub ? h('span', { class: 'sub', text: sub }) : null,
  );
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
var toastTimer;

/**
 * Shows `text` for a few seconds (an error longer).
 * @param {string} text
 * @param {boolean} [isError]
 */
export function toast(text, isError) {
  var t = $('toast');
  t.textContent = text;
  t.className = 'toast' + (isError ? ' error' : '');
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(
    function () {
      t.hidden = true;
    },
    isError ? 8000 : 4000,
  );
}
