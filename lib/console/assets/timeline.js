// @ts-check
// The failure timeline: the selected queue's parked messages over time (per
// minute over the last hour, or per hour over the last week), by error group,
// from when each one parked. Stacked bars in an SVG the page builds itself,
// its text written as text nodes.

import { h, n } from './dom.js';
import { S, redraw } from './store.js';

/** @typedef {import('../views').Grouping} Grouping */
/** @typedef {import('../timeline').Timeline} Timeline */
/** @typedef {import('../timeline').TimelineResolution} TimelineResolution */

var SVG = 'http://www.w3.org/2000/svg';

/** The colors of the largest groups, in the order of the groups' table; the others share {@link OTHER}. */
var PALETTE = ['#2563eb', '#dc2626', '#d97706', '#059669', '#7c3aed', '#db2777', '#0891b2'];
var OTHER = '#9ca3af';

/** The chart's size in its own units (it is scaled to the panel's width), and its margins. */
var W = 960;
var H = 170;
var LEFT = 36;
var RIGHT = 8;
var TOP = 10;
var BOTTOM = 22;

/**
 * The color of group `key` of `grouping`: by its place in the groups' table.
 * @param {Grouping} grouping
 * @param {string} key
 */
export function colorOf(grouping, key) {
  var i = grouping.groups.findIndex(function (g) {
    return g.key === key;
  });
  return i >= 0 && i < PALETTE.length ? PALETTE[i] : OTHER;
}

/**
 * An SVG element `tag` with `attrs` and `children`.
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 * @param {...(Element | string)} children
 * @returns {SVGElement}
 */
function svg(tag, attrs, ...children) {
  var el = /** @type {SVGElement} */ (document.createElementNS(SVG, tag));
  Object.keys(attrs).forEach(function (k) {
    el.setAttribute(k, String(attrs[k]));
  });
  children.forEach(function (c) {
    el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  });
  return el;
}

/** @param {number} x */
function pad(x) {
  return (x < 10 ? '0' : '') + x;
}

var DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

/**
 * A bucket's start as the axis and the bars' titles name it, in the browser's time zone.
 * @param {Timeline} t
 * @param {number} i
 */
function bucketName(t, i) {
  var d = new Date(Date.parse(t.from) + i * t.bucketMs);
  var time = pad(d.getHours()) + ':' + pad(d.getMinutes());
  return t.resolution === 'minute' ? time : DAYS[d.getDay()] + ' ' + d.getDate() + ' ' + time;
}

/**
 * Whether bucket `i` gets a label on the axis: every 10 minutes, or each midnight.
 * @param {Timeline} t
 * @param {number} i
 */
function labelled(t, i) {
  var d = new Date(Date.parse(t.from) + i * t.bucketMs);
  return t.resolution === 'minute' ? d.getMinutes() % 10 === 0 : d.getHours() === 0;
}

/**
 * The timeline of `grouping` at the resolution the operator chose, with its switch and legend.
 * @param {Grouping} grouping
 * @returns {HTMLElement}
 */
export function timelineSection(grouping) {
  /** @type {TimelineResolution} */
  var res = S.timelineRes;
  var t = grouping.timeline[res];
  var span = res === 'minute' ? 'the last hour, per minute' : 'the last week, per hour';
  var inside = t.groups.reduce(function (a, g) {
    return a + g.total;
  }, 0);
  var notes = [n(inside) + ' parked in ' + span];
  if (t.before) notes.push(n(t.before) + ' earlier');
  if (t.undated) notes.push(n(t.undated) + ' without a time they parked');
  if (grouping.truncated) notes.push('of the first ' + n(grouping.scanned) + ' read');
  return h(
    'div',
    { class: 'timeline', id: 'timeline', 'data-resolution': res },
    h(
      'div',
      { class: 'timeline-head' },
      h('h3', { text: 'Failure timeline' }),
      h('div', { class: 'switch' }, switchButton('minute', 'Last hour'), switchButton('hour', 'Last week')),
      h('span', { class: 'note', text: notes.join(' · ') + ' (as read at the grouping)' }),
    ),
    chart(grouping, t),
    legend(grouping, t),
  );
}

/**
 * A button that shows the timeline at `res`.
 * @param {TimelineResolution} res
 * @param {string} label
 */
function switchButton(res, label) {
  return h(
    'button',
    {
      type: 'button',
      class: S.timelineRes === res ? '' : 'secondary',
      'data-resolution': res,
      'aria-pressed': String(S.timelineRes === res),
      onclick: function () {
        S.timelineRes = res;
        redraw();
      },
    },
    label,
  );
}

/**
 * The bars: one stack a bucket, a rectangle a group, the largest group at the bottom.
 * @param {Grouping} grouping
 * @param {Timeline} t
 */
function chart(grouping, t) {
  var plotW = W - LEFT - RIGHT;
  var plotH = H - TOP - BOTTOM;
  var bw = plotW / t.buckets;
  var gap = bw > 4 ? 1 : 0;
  var max = 1;
  for (var i = 0; i < t.buckets; i++) {
    var sum = 0;
    t.groups.forEach(function (g) {
      sum += g.counts[i];
    });
    max = Math.max(max, sum);
  }
  /** @type {SVGElement[]} */
  var parts = [
    svg('line', { x1: LEFT, x2: W - RIGHT, y1: TOP + plotH, y2: TOP + plotH, class: 'axis' }),
    svg('line', { x1: LEFT, x2: W - RIGHT, y1: TOP, y2: TOP, class: 'grid' }),
    svg('text', { x: LEFT - 6, y: TOP + 4, 'text-anchor': 'end', class: 'tick' }, String(max)),
    svg('text', { x: LEFT - 6, y: TOP + plotH + 4, 'text-anchor': 'end', class: 'tick' }, '0'),
  ];
  for (var b = 0; b < t.buckets; b++) {
    var x = LEFT + b * bw;
    if (labelled(t, b)) {
      parts.push(svg('line', { x1: x, x2: x, y1: TOP + plotH, y2: TOP + plotH + 4, class: 'axis' }));
      parts.push(svg('text', { x: x, y: H - 4, 'text-anchor': 'middle', class: 'tick' }, bucketName(t, b)));
    }
    var y = TOP + plotH;
    t.groups.forEach(function (g) {
      var c = g.counts[b];
      if (!c) return;
      var height = (c / max) * plotH;
      y -= height;
      var group = grouping.groups.find(function (other) {
        return other.key === g.key;
      });
      var name = group ? group.errorName + ': ' + group.message : g.key;
      parts.push(
        svg(
          'rect',
          {
            x: x + gap / 2,
            y: y,
            width: Math.max(0.5, bw - gap),
            height: height,
            fill: colorOf(grouping, g.key),
            'data-group': g.key,
            'data-bucket': b,
            'data-count': c,
          },
          svg('title', {}, bucketName(t, b) + ' · ' + c + ' × ' + name),
        ),
      );
    });
  }
  if (!t.groups.length) {
    parts.push(
      svg(
        'text',
        { x: LEFT + plotW / 2, y: TOP + plotH / 2, 'text-anchor': 'middle', class: 'empty-chart' },
        t.resolution === 'minute' ? 'No message parked in the last hour' : 'No message parked in the last week',
      ),
    );
  }
  return svg('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart', role: 'img', 'aria-label': 'parked messages over time, by error group' }, ...parts);
}

/**
 * The groups the timeline shows, each with its color and its count in it.
 * @param {Grouping} grouping
 * @param {Timeline} t
 */
function legend(grouping, t) {
  return h(
    'ul',
    { class: 'legend' },
    t.groups.map(function (g) {
      var group = grouping.groups.find(function (other) {
        return other.key === g.key;
      });
      var swatch = h('span', { class: 'swatch' });
      swatch.style.background = colorOf(grouping, g.key);
      return h(
        'li',
        { 'data-group': g.key },
        swatch,
        h('span', { class: 'ename', text: group ? group.errorName : g.key }),
        ' ',
        h('span', { class: 'mono', text: group ? group.message : '' }),
        ' ',
        h('span', { class: 'count', text: n(g.total) }),
      );
    }),
  );
}
